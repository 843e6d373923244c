#include "service/status.h"

namespace ccpool::service {
namespace {

using nlohmann::json;

// A number, else 0 (a float is truncated), as every reader of a status did.
uint64_t u64(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return 0;
  if (it->is_number_float()) return static_cast<uint64_t>(it->get<double>());
  return it->get<uint64_t>();
}

const json* section(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_object() ? &*it : nullptr;
}

json histogram_json(const HistogramFigures& h) {
  return {{"le", h.le}, {"counts", h.counts}, {"sum_s", h.sum_s}};
}

std::optional<HistogramFigures> histogram_from_json(const json& h) {
  if (!h.is_object() || !h.contains("counts") || !h.contains("le")) return std::nullopt;
  HistogramFigures out;
  for (const json& c : h["counts"]) out.counts.push_back(c.get<uint64_t>());
  for (const json& b : h["le"]) out.le.push_back(b.get<double>());
  out.sum_s = h.value("sum_s", 0.0);
  return out;
}

// Negative or fractional counts read as 0.
std::map<std::string, uint64_t> reasons_from_json(const json& j, const char* key) {
  std::map<std::string, uint64_t> out;
  const json* reasons = section(j, key);
  if (reasons == nullptr) return out;
  for (const auto& [reason, n] : reasons->items()) {
    out[reason] = n.is_number_integer() && n.get<int64_t>() >= 0 ? n.get<uint64_t>() : 0;
  }
  return out;
}

StoreFigures store_from_json(const json& st) {
  return {u64(st, "entries"),      u64(st, "stored_bytes"), u64(st, "logical_bytes"),
          u64(st, "max_size"),     u64(st, "evictions"),    u64(st, "corrupt_evictions"),
          u64(st, "time_saved_ms")};
}

WorkerPoolFigures worker_pool_from_json(const json& w) {
  WorkerPoolFigures out{u64(w, "sessions"),  u64(w, "workers"), u64(w, "busy"),
                        u64(w, "rss_bytes"), u64(w, "spawned"), u64(w, "jobs"),
                        u64(w, "followed"),  u64(w, "failed"),  u64(w, "cancelled"),
                        std::nullopt};
  if (const json* counts = section(w, "counts")) {
    out.counts.emplace();
    for (const auto& [name, n] : counts->items()) (*out.counts)[name] = u64(*counts, name.c_str());
  }
  return out;
}

}  // namespace

HistogramFigures histogram_figures(const Histogram::Snapshot& snapshot) {
  HistogramFigures out;
  out.le.assign(std::begin(Histogram::kUpperBounds), std::end(Histogram::kUpperBounds));
  out.counts.assign(std::begin(snapshot.counts), std::end(snapshot.counts));
  out.sum_s = static_cast<double>(snapshot.sum_ns) / 1e9;
  return out;
}

void write_status_json(json& j, const ServiceStatus& s) {
  j["version"] = s.version;
  j["start_time_s"] = s.start_time_s;
  j["requests"] = s.requests;
  j["hits"] = s.hits;
  j["exec_remote_hits"] = s.exec_remote_hits;
  j["misses"] = s.misses;
  j["joins"] = s.joins;
  j["passthrough"] = s.passthrough;
  j["not_stored"] = s.not_stored;
  j["passthrough_reasons"] = s.passthrough_reasons;
  j["not_stored_reasons"] = s.not_stored_reasons;
  j["service_errors"] = s.service_errors;
  j["fallbacks"] = s.fallbacks;
  if (s.hit_latency) j["hit_latency"] = histogram_json(*s.hit_latency);
  j["hit_stage_seconds"] = s.hit_stage_seconds;
  j["executions"] = s.executions;
  j["failures"] = s.failures;
  j["cancelled"] = s.cancelled;
  j["queued"] = s.queued;
  j["running"] = s.running;
  j["peak_running"] = s.peak_running;
  j["jobs"] = s.jobs;
  j["mem_budget"] = s.mem_budget;
  j["mem_reserved"] = s.mem_reserved;
  j["clients"] = s.clients;
  j["refused_peers"] = s.refused_peers;
  j["protocol_errors"] = s.protocol_errors;
  j["store_errors"] = s.store_errors;
  if (s.store) {
    const StoreFigures& st = *s.store;
    j["store"] = {{"entries", st.entries},
                  {"stored_bytes", st.stored_bytes},
                  {"logical_bytes", st.logical_bytes},
                  {"max_size", st.max_size},
                  {"evictions", st.evictions},
                  {"corrupt_evictions", st.corrupt_evictions},
                  {"time_saved_ms", st.time_saved_ms}};
  } else {
    j["store"] = nullptr;
  }
  const ClusterFigures& c = s.cluster;
  j["remote"] = c.remote;
  j["remote_hits"] = c.hits;
  j["remote_misses"] = c.misses;
  j["remote_errors"] = c.errors;
  j["remote_writes"] = c.writes;
  j["remote_invalid"] = c.invalid;
  j["remote_bad_signature"] = c.bad_signature;
  j["breaker_open"] = c.breaker_open;
  j["breaker_opened"] = c.breaker_opened;
  if (!s.tier_latency.empty()) {
    json& tiers = j["tier_latency"];
    for (const auto& [tier, h] : s.tier_latency) tiers[tier] = h ? histogram_json(*h) : json();
  }
  if (s.front) {
    j["resp_commands"] = s.front->commands;
    j["resp_connections"] = s.front->connections;
    j["resp_refused_peers"] = s.front->refused_peers;
  }
  if (s.worker_pool) {
    const WorkerPoolFigures& w = *s.worker_pool;
    json& out = j["worker_pool"];
    out["sessions"] = w.sessions;
    out["workers"] = w.workers;
    out["busy"] = w.busy;
    out["rss_bytes"] = w.rss_bytes;
    out["spawned"] = w.spawned;
    out["jobs"] = w.jobs;
    out["followed"] = w.followed;
    out["failed"] = w.failed;
    out["cancelled"] = w.cancelled;
    if (w.counts) out["counts"] = *w.counts;
  }
  if (s.leases) {
    json& out = j["leases"];
    out["keys_in_flight"] = s.leases->keys_in_flight;
    out["waiting"] = s.leases->waiting;
    out["served"] = s.leases->served;
    out["abandoned"] = s.leases->abandoned;
    out["timed_out"] = s.leases->timed_out;
  }
}

ServiceStatus status_from_json(const json& j) {
  ServiceStatus s;
  s.version = j.value("version", "unknown");
  s.start_time_s = u64(j, "start_time_s");
  s.requests = u64(j, "requests");
  s.hits = u64(j, "hits");
  s.exec_remote_hits = u64(j, "exec_remote_hits");
  s.misses = u64(j, "misses");
  s.joins = u64(j, "joins");
  s.passthrough = u64(j, "passthrough");
  s.not_stored = u64(j, "not_stored");
  s.passthrough_reasons = reasons_from_json(j, "passthrough_reasons");
  s.not_stored_reasons = reasons_from_json(j, "not_stored_reasons");
  s.service_errors = u64(j, "service_errors");
  s.fallbacks = u64(j, "fallbacks");
  if (auto it = j.find("hit_latency"); it != j.end()) s.hit_latency = histogram_from_json(*it);
  if (auto it = j.find("hit_stage_seconds"); it != j.end() && it->is_object()) {
    for (const auto& [stage, seconds] : it->items()) {
      if (seconds.is_number()) s.hit_stage_seconds[stage] = seconds.get<double>();
    }
  }
  s.executions = u64(j, "executions");
  s.failures = u64(j, "failures");
  s.cancelled = u64(j, "cancelled");
  s.queued = u64(j, "queued");
  s.running = u64(j, "running");
  s.peak_running = u64(j, "peak_running");
  s.jobs = u64(j, "jobs");
  s.mem_budget = u64(j, "mem_budget");
  s.mem_reserved = u64(j, "mem_reserved");
  s.clients = u64(j, "clients");
  s.refused_peers = u64(j, "refused_peers");
  s.protocol_errors = u64(j, "protocol_errors");
  s.store_errors = u64(j, "store_errors");
  if (const json* st = section(j, "store")) s.store = store_from_json(*st);
  s.cluster = {
      j.value("remote", false),       u64(j, "remote_hits"),          u64(j, "remote_misses"),
      u64(j, "remote_errors"),        u64(j, "remote_writes"),        u64(j, "remote_invalid"),
      u64(j, "remote_bad_signature"), j.value("breaker_open", false), u64(j, "breaker_opened")};
  if (const json* tiers = section(j, "tier_latency")) {
    for (const auto& [tier, h] : tiers->items()) s.tier_latency[tier] = histogram_from_json(h);
  }
  if (j.contains("resp_commands")) {
    s.front = FrontFigures{u64(j, "resp_commands"), u64(j, "resp_connections"),
                           u64(j, "resp_refused_peers")};
  }
  if (const json* w = section(j, "worker_pool")) s.worker_pool = worker_pool_from_json(*w);
  if (const json* l = section(j, "leases")) {
    s.leases = LeaseFigures{u64(*l, "keys_in_flight"), u64(*l, "waiting"), u64(*l, "served"),
                            u64(*l, "abandoned"), u64(*l, "timed_out")};
  }
  return s;
}

}  // namespace ccpool::service
