#include "service/metrics.h"

#include <charconv>
#include <cstdint>
#include <utility>
#include <vector>

namespace ccpool::service {
namespace {

using Labels = std::vector<std::pair<std::string_view, std::string>>;

std::string format_number(double v, std::chars_format style = std::chars_format::general) {
  char buf[400];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, style);
  return ec == std::errc() ? std::string(buf, end) : "NaN";
}

// Label values escape backslash, double quote and newline (both formats).
std::string escape_label(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

// Writes families in order. In OpenMetrics a counter family is named without
// its `_total` suffix on the HELP/TYPE lines; its samples keep it.
class Exposition {
 public:
  explicit Exposition(MetricsFormat format) : m_om(format == MetricsFormat::kOpenMetrics) {}

  void family(std::string_view name, std::string_view type, std::string_view help) {
    std::string_view family_name = name;
    if (m_om && type == "counter" && family_name.ends_with("_total")) family_name.remove_suffix(6);
    // An info metric is a gauge of value 1 in the text format.
    if (type == "info" && !m_om) type = "gauge";
    if (type == "info") family_name.remove_suffix(5);
    m_out += "# HELP " + std::string(family_name) + " " + std::string(help) + "\n";
    m_out += "# TYPE " + std::string(family_name) + " " + std::string(type) + "\n";
  }
  void sample(std::string_view name, const Labels& labels, const std::string& value) {
    m_out += name;
    if (!labels.empty()) {
      m_out += '{';
      for (size_t i = 0; i < labels.size(); ++i) {
        if (i > 0) m_out += ',';
        m_out += std::string(labels[i].first) + "=\"" + escape_label(labels[i].second) + "\"";
      }
      m_out += '}';
    }
    m_out += ' ' + value + '\n';
  }
  void sample(std::string_view name, const Labels& labels, uint64_t value) {
    sample(name, labels, std::to_string(value));
  }
  void one(std::string_view name, std::string_view type, std::string_view help, uint64_t value) {
    family(name, type, help);
    sample(name, {}, value);
  }
  std::string finish() {
    if (m_om) m_out += "# EOF\n";
    return std::move(m_out);
  }

 private:
  bool m_om;
  std::string m_out;
};

uint64_t u64(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return 0;
  if (it->is_number_float()) return static_cast<uint64_t>(it->get<double>());
  return it->get<uint64_t>();
}

// A histogram family from histogram_json's shape; `labels` distinguish series.
void histogram_samples(Exposition& e, std::string_view name, const Labels& labels,
                       const nlohmann::json& h) {
  if (!h.is_object() || !h.contains("counts") || !h.contains("le")) return;
  const auto& counts = h["counts"];
  const auto& le = h["le"];
  uint64_t cumulative = 0;
  std::string base(name);
  for (size_t i = 0; i < counts.size(); ++i) {
    cumulative += counts[i].get<uint64_t>();
    Labels with = labels;
    with.emplace_back("le", i < le.size() ? format_number(le[i].get<double>(), std::chars_format::fixed) : "+Inf");
    e.sample(base + "_bucket", with, cumulative);
  }
  e.sample(base + "_sum", labels, format_number(h.value("sum_s", 0.0)));
  e.sample(base + "_count", labels, cumulative);
}

// Pass-through and not-stored requests carry a why-not `reason` label when the
// status has per-reason counts (`<key>_reasons`: {"code": n}); otherwise one
// unlabelled series.
void result_with_reasons(Exposition& e, const nlohmann::json& s, const char* result,
                         const char* key) {
  std::string reasons_key = std::string(key) + "_reasons";
  auto it = s.find(reasons_key);
  if (it == s.end() || !it->is_object() || it->empty()) {
    e.sample("ccpool_requests_total", {{"result", result}}, u64(s, key));
    return;
  }
  uint64_t labelled = 0;
  for (const auto& [reason, n] : it->items()) {
    uint64_t count = n.is_number_integer() && n.get<int64_t>() >= 0 ? n.get<uint64_t>() : 0;
    labelled += count;
    e.sample("ccpool_requests_total", {{"result", result}, {"reason", reason}}, count);
  }
  // The series of one result add up to its total, whatever the reasons cover.
  uint64_t total = u64(s, key);
  if (total > labelled && !it->contains("unspecified")) {
    e.sample("ccpool_requests_total", {{"result", result}, {"reason", "unspecified"}}, total - labelled);
  }
}

void render_requests(Exposition& e, const nlohmann::json& s) {
  e.family("ccpool_requests_total", "counter",
           "Exec requests by how they were served (pass_through and not_stored carry a reason)");
  e.sample("ccpool_requests_total", {{"result", "hit"}}, u64(s, "hits"));
  e.sample("ccpool_requests_total", {{"result", "remote_hit"}}, u64(s, "exec_remote_hits"));
  e.sample("ccpool_requests_total", {{"result", "miss"}}, u64(s, "misses"));
  e.sample("ccpool_requests_total", {{"result", "join"}}, u64(s, "joins"));
  result_with_reasons(e, s, "pass_through", "passthrough");
  result_with_reasons(e, s, "not_stored", "not_stored");
  e.sample("ccpool_requests_total", {{"result", "failed"}}, u64(s, "service_errors"));
  e.sample("ccpool_requests_total", {{"result", "fallback"}}, u64(s, "fallbacks"));
  e.one("ccpool_requests_received_total", "counter", "Exec requests received", u64(s, "requests"));
  e.family("ccpool_hit_duration_seconds", "histogram",
           "Service-side time of a hit, from request decoded to reply queued");
  histogram_samples(e, "ccpool_hit_duration_seconds", {}, s.value("hit_latency", nlohmann::json()));
}

void render_pool(Exposition& e, const nlohmann::json& s) {
  e.one("ccpool_executions_total", "counter", "Tool processes the pool started", u64(s, "executions"));
  e.one("ccpool_execution_failures_total", "counter",
        "Executions that failed (non-zero exit, signal, timeout)", u64(s, "failures"));
  e.one("ccpool_executions_cancelled_total", "counter",
        "Jobs cancelled because every waiter disconnected", u64(s, "cancelled"));
  e.one("ccpool_queue_depth", "gauge", "Jobs waiting for admission", u64(s, "queued"));
  e.one("ccpool_running_jobs", "gauge", "Jobs running now", u64(s, "running"));
  e.one("ccpool_running_jobs_peak", "gauge", "Most jobs ever running at once", u64(s, "peak_running"));
  e.one("ccpool_pool_slots", "gauge", "Tool processes that may run at once", u64(s, "jobs"));
  e.one("ccpool_memory_budget_bytes", "gauge", "Memory budget for running jobs", u64(s, "mem_budget"));
  e.one("ccpool_memory_reserved_bytes", "gauge",
        "Learned memory estimates of the jobs running now", u64(s, "mem_reserved"));
  e.one("ccpool_clients", "gauge", "Client connections open now", u64(s, "clients"));
  e.one("ccpool_refused_peers_total", "counter", "Connections refused: another uid",
        u64(s, "refused_peers"));
  e.one("ccpool_protocol_errors_total", "counter", "Connections closed for a protocol violation",
        u64(s, "protocol_errors"));
}

void render_store(Exposition& e, const nlohmann::json& s) {
  auto it = s.find("store");
  if (it == s.end() || !it->is_object()) return;
  const nlohmann::json& st = *it;
  e.one("ccpool_store_entries", "gauge", "Entries in the node store", u64(st, "entries"));
  e.one("ccpool_store_bytes", "gauge", "Bytes the node store holds (compressed, deduplicated)",
        u64(st, "stored_bytes"));
  e.one("ccpool_store_logical_bytes", "gauge", "Bytes the entries would take uncompressed",
        u64(st, "logical_bytes"));
  e.one("ccpool_store_max_bytes", "gauge", "Size bound of the node store", u64(st, "max_size"));
  e.one("ccpool_store_evictions_total", "counter", "Entries evicted to stay within the size bound",
        u64(st, "evictions"));
  e.one("ccpool_store_corrupt_evictions_total", "counter",
        "Entries evicted because a body failed its checksum", u64(st, "corrupt_evictions"));
  e.one("ccpool_store_write_errors_total", "counter", "Store writes that failed", u64(s, "store_errors"));
  e.family("ccpool_time_saved_seconds_total", "counter",
           "Tool time the store's hits saved, summed over the store's life");
  e.sample("ccpool_time_saved_seconds_total", {},
           format_number(static_cast<double>(u64(st, "time_saved_ms")) / 1000.0));
}

void render_cluster(Exposition& e, const nlohmann::json& s) {
  if (!s.value("remote", false)) return;
  e.one("ccpool_cluster_hits_total", "counter", "Values served from the cluster tier",
        u64(s, "remote_hits"));
  e.one("ccpool_cluster_misses_total", "counter", "Cluster tier lookups that found nothing",
        u64(s, "remote_misses"));
  e.one("ccpool_cluster_errors_total", "counter", "Cluster tier operations that failed",
        u64(s, "remote_errors"));
  e.one("ccpool_cluster_writes_total", "counter", "Values written to the cluster tier",
        u64(s, "remote_writes"));
  e.one("ccpool_cluster_invalid_total", "counter",
        "Cluster values refused (bad envelope, structure or signature)",
        u64(s, "remote_invalid") + u64(s, "remote_bad_signature"));
  e.one("ccpool_cluster_breaker_open", "gauge", "1 while the cluster tier's circuit breaker is open",
        s.value("breaker_open", false) ? 1 : 0);
  e.one("ccpool_cluster_breaker_opened_total", "counter", "Times the circuit breaker opened",
        u64(s, "breaker_opened"));
}

void render_tiers(Exposition& e, const nlohmann::json& s) {
  auto it = s.find("tier_latency");
  if (it == s.end() || !it->is_object() || it->empty()) return;
  e.family("ccpool_tier_lookup_duration_seconds", "histogram", "Lookup latency of each store tier");
  for (const auto& [tier, h] : it->items()) {
    histogram_samples(e, "ccpool_tier_lookup_duration_seconds", {{"tier", tier}}, h);
  }
}

void render_front(Exposition& e, const nlohmann::json& s) {
  if (!s.contains("resp_commands")) return;
  e.one("ccpool_resp_commands_total", "counter", "Commands the Redis-protocol front executed",
        u64(s, "resp_commands"));
  e.one("ccpool_resp_connections_total", "counter", "Connections the Redis-protocol front admitted",
        u64(s, "resp_connections"));
  e.one("ccpool_resp_refused_peers_total", "counter", "Redis-protocol connections refused",
        u64(s, "resp_refused_peers"));
}

void render_worker_pool(Exposition& e, const nlohmann::json& s) {
  auto it = s.find("worker_pool");
  if (it == s.end() || !it->is_object()) return;
  const nlohmann::json& w = *it;
  e.one("ccpool_worker_pool_workers", "gauge", "Inductor compile workers of the node pool alive now",
        u64(w, "workers"));
  e.one("ccpool_worker_pool_busy", "gauge", "Compile workers running a job now", u64(w, "busy"));
  e.one("ccpool_worker_pool_rss_bytes", "gauge", "Resident memory of the compile workers now", u64(w, "rss_bytes"));
  e.one("ccpool_worker_pool_sessions", "gauge", "Ranks with a pool session open now", u64(w, "sessions"));
  e.one("ccpool_worker_pool_spawned_total", "counter", "Compile workers started", u64(w, "spawned"));
  e.one("ccpool_worker_pool_jobs_total", "counter", "Compile jobs the node pool ran", u64(w, "jobs"));
  e.one("ccpool_worker_pool_followed_total", "counter",
        "Compile jobs that ran after an equal job of another rank", u64(w, "followed"));
  e.one("ccpool_worker_pool_failed_total", "counter", "Compile jobs the node pool could not run (the rank ran them)",
        u64(w, "failed"));
  e.one("ccpool_worker_pool_cancelled_total", "counter", "Compile jobs withdrawn by their rank", u64(w, "cancelled"));
  auto counts = w.find("counts");
  if (counts != w.end() && counts->is_object()) {
    e.one("ccpool_worker_pool_triton_compiles_total", "counter", "Triton kernels compiled and stored by the pool",
          u64(*counts, "triton_compiles"));
    e.one("ccpool_worker_pool_triton_store_hits_total", "counter", "Triton kernels served from the node store",
          u64(*counts, "triton_store_hits"));
  }
}

void render_leases(Exposition& e, const nlohmann::json& s) {
  auto it = s.find("leases");
  if (it == s.end() || !it->is_object()) return;
  const nlohmann::json& l = *it;
  e.one("ccpool_leases_in_flight", "gauge", "Keys a client computes now (graph compiles, Triton kernels)",
        u64(l, "keys_in_flight"));
  e.one("ccpool_lease_waiters", "gauge", "Clients waiting for another's value now", u64(l, "waiting"));
  e.family("ccpool_lease_waits_total", "counter", "Waits for another client's value, by how they ended");
  for (const char* outcome : {"served", "abandoned", "timed_out"}) {
    e.sample("ccpool_lease_waits_total", {{"outcome", outcome}}, u64(l, outcome));
  }
}

}  // namespace

MetricsFormat format_for_accept(std::string_view accept) {
  // Each comma-separated media range; q=0 means "not acceptable".
  size_t pos = 0;
  while (pos <= accept.size()) {
    size_t end = accept.find(',', pos);
    std::string_view range = accept.substr(pos, end == std::string_view::npos ? accept.npos : end - pos);
    if (range.find("application/openmetrics-text") != std::string_view::npos &&
        range.find("q=0;") == std::string_view::npos && !range.ends_with("q=0") &&
        !range.ends_with("q=0.0")) {
      return MetricsFormat::kOpenMetrics;
    }
    if (end == std::string_view::npos) break;
    pos = end + 1;
  }
  return MetricsFormat::kPrometheusText;
}

std::string_view content_type(MetricsFormat format) {
  return format == MetricsFormat::kOpenMetrics ? kOpenMetricsType : kPrometheusTextType;
}

nlohmann::json histogram_json(const Histogram::Snapshot& snapshot) {
  nlohmann::json le = nlohmann::json::array();
  for (double b : Histogram::kUpperBounds) le.push_back(b);
  nlohmann::json counts = nlohmann::json::array();
  for (uint64_t c : snapshot.counts) counts.push_back(c);
  return {{"le", le}, {"counts", counts}, {"sum_s", static_cast<double>(snapshot.sum_ns) / 1e9}};
}

std::string render_metrics(const nlohmann::json& status, MetricsFormat format) {
  Exposition e(format);
  e.family("ccpool_build_info", "info", "Version of the running service");
  e.sample("ccpool_build_info", {{"version", status.value("version", "unknown")}}, 1);
  e.family("ccpool_start_time_seconds", "gauge", "Start time of the service, seconds since the epoch");
  e.sample("ccpool_start_time_seconds", {}, u64(status, "start_time_s"));
  render_requests(e, status);
  render_pool(e, status);
  render_store(e, status);
  render_cluster(e, status);
  render_tiers(e, status);
  render_front(e, status);
  render_worker_pool(e, status);
  render_leases(e, status);
  return e.finish();
}

}  // namespace ccpool::service
