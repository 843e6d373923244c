#include "service/metrics.h"

#include <charconv>
#include <cstdint>
#include <map>
#include <optional>
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
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
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

// A histogram family's samples; `labels` distinguish series.
void histogram_samples(Exposition& e, std::string_view name, const Labels& labels,
                       const HistogramFigures& h) {
  uint64_t cumulative = 0;
  std::string base(name);
  for (size_t i = 0; i < h.counts.size(); ++i) {
    cumulative += h.counts[i];
    Labels with = labels;
    with.emplace_back("le",
                      i < h.le.size() ? format_number(h.le[i], std::chars_format::fixed) : "+Inf");
    e.sample(base + "_bucket", with, cumulative);
  }
  e.sample(base + "_sum", labels, format_number(h.sum_s));
  e.sample(base + "_count", labels, cumulative);
}

// Pass-through and not-stored requests carry a why-not `reason` label when the
// status has per-reason counts; otherwise one unlabelled series.
void result_with_reasons(Exposition& e, const char* result, uint64_t total,
                         const std::map<std::string, uint64_t>& reasons) {
  if (reasons.empty()) {
    e.sample("ccpool_requests_total", {{"result", result}}, total);
    return;
  }
  uint64_t labelled = 0;
  for (const auto& [reason, count] : reasons) {
    labelled += count;
    e.sample("ccpool_requests_total", {{"result", result}, {"reason", reason}}, count);
  }
  // The series of one result add up to its total, whatever the reasons cover.
  if (total > labelled && !reasons.contains("unspecified")) {
    e.sample("ccpool_requests_total", {{"result", result}, {"reason", "unspecified"}},
             total - labelled);
  }
}

void render_requests(Exposition& e, const ServiceStatus& s) {
  e.family("ccpool_requests_total", "counter",
           "Exec requests by how they were served (pass_through and not_stored carry a reason)");
  e.sample("ccpool_requests_total", {{"result", "hit"}}, s.hits);
  e.sample("ccpool_requests_total", {{"result", "remote_hit"}}, s.exec_remote_hits);
  e.sample("ccpool_requests_total", {{"result", "miss"}}, s.misses);
  e.sample("ccpool_requests_total", {{"result", "join"}}, s.joins);
  result_with_reasons(e, "pass_through", s.passthrough, s.passthrough_reasons);
  result_with_reasons(e, "not_stored", s.not_stored, s.not_stored_reasons);
  e.sample("ccpool_requests_total", {{"result", "failed"}}, s.service_errors);
  e.sample("ccpool_requests_total", {{"result", "fallback"}}, s.fallbacks);
  e.one("ccpool_requests_received_total", "counter", "Exec requests received", s.requests);
  e.family("ccpool_hit_duration_seconds", "histogram",
           "Service-side time of a hit, from request decoded to reply queued");
  if (s.hit_latency) histogram_samples(e, "ccpool_hit_duration_seconds", {}, *s.hit_latency);
  e.family(
      "ccpool_hit_stage_seconds_total", "counter",
      "Service-side time of the hits, by stage (handoff, plan, lookup, fetch, deliver, reply)");
  for (const auto& [stage, seconds] : s.hit_stage_seconds) {
    e.sample("ccpool_hit_stage_seconds_total", {{"stage", stage}}, format_number(seconds));
  }
}

void render_pool(Exposition& e, const ServiceStatus& s) {
  e.one("ccpool_executions_total", "counter", "Tool processes the pool started", s.executions);
  e.one("ccpool_execution_failures_total", "counter",
        "Executions that failed (non-zero exit, signal, timeout)", s.failures);
  e.one("ccpool_executions_cancelled_total", "counter",
        "Jobs cancelled because every waiter disconnected", s.cancelled);
  e.one("ccpool_queue_depth", "gauge", "Jobs waiting for admission", s.queued);
  e.one("ccpool_running_jobs", "gauge", "Jobs running now", s.running);
  e.one("ccpool_running_jobs_peak", "gauge", "Most jobs ever running at once", s.peak_running);
  e.one("ccpool_pool_slots", "gauge", "Tool processes that may run at once", s.jobs);
  e.one("ccpool_memory_budget_bytes", "gauge", "Memory budget for running jobs", s.mem_budget);
  e.one("ccpool_memory_reserved_bytes", "gauge", "Learned memory estimates of the jobs running now",
        s.mem_reserved);
  e.one("ccpool_clients", "gauge", "Client connections open now", s.clients);
  e.one("ccpool_refused_peers_total", "counter", "Connections refused: another uid",
        s.refused_peers);
  e.one("ccpool_protocol_errors_total", "counter", "Connections closed for a protocol violation",
        s.protocol_errors);
}

void render_store(Exposition& e, const ServiceStatus& s) {
  if (!s.store) return;
  const StoreFigures& st = *s.store;
  e.one("ccpool_store_entries", "gauge", "Entries in the node store", st.entries);
  e.one("ccpool_store_bytes", "gauge", "Bytes the node store holds (compressed, deduplicated)",
        st.stored_bytes);
  e.one("ccpool_store_logical_bytes", "gauge", "Bytes the entries would take uncompressed",
        st.logical_bytes);
  e.one("ccpool_store_max_bytes", "gauge", "Size bound of the node store", st.max_size);
  e.one("ccpool_store_evictions_total", "counter", "Entries evicted to stay within the size bound",
        st.evictions);
  e.one("ccpool_store_corrupt_evictions_total", "counter",
        "Entries evicted because a body failed its checksum", st.corrupt_evictions);
  e.one("ccpool_store_write_errors_total", "counter", "Store writes that failed", s.store_errors);
  e.family("ccpool_time_saved_seconds_total", "counter",
           "Tool time the store's hits saved, summed over the store's life");
  e.sample("ccpool_time_saved_seconds_total", {},
           format_number(static_cast<double>(st.time_saved_ms) / 1000.0));
}

void render_cluster(Exposition& e, const ClusterFigures& c) {
  if (!c.remote) return;
  e.one("ccpool_cluster_hits_total", "counter", "Values served from the cluster tier", c.hits);
  e.one("ccpool_cluster_misses_total", "counter", "Cluster tier lookups that found nothing",
        c.misses);
  e.one("ccpool_cluster_errors_total", "counter", "Cluster tier operations that failed", c.errors);
  e.one("ccpool_cluster_writes_total", "counter", "Values written to the cluster tier", c.writes);
  e.one("ccpool_cluster_invalid_total", "counter",
        "Cluster values refused (bad envelope, structure or signature)",
        c.invalid + c.bad_signature);
  e.one("ccpool_cluster_breaker_open", "gauge",
        "1 while the cluster tier's circuit breaker is open", c.breaker_open ? 1 : 0);
  e.one("ccpool_cluster_breaker_opened_total", "counter", "Times the circuit breaker opened",
        c.breaker_opened);
}

void render_tiers(Exposition& e, const ServiceStatus& s) {
  if (s.tier_latency.empty()) return;
  e.family("ccpool_tier_lookup_duration_seconds", "histogram", "Lookup latency of each store tier");
  for (const auto& [tier, h] : s.tier_latency) {
    if (h) histogram_samples(e, "ccpool_tier_lookup_duration_seconds", {{"tier", tier}}, *h);
  }
}

void render_front(Exposition& e, const std::optional<FrontFigures>& front) {
  if (!front) return;
  e.one("ccpool_resp_commands_total", "counter", "Commands the Redis-protocol front executed",
        front->commands);
  e.one("ccpool_resp_connections_total", "counter", "Connections the Redis-protocol front admitted",
        front->connections);
  e.one("ccpool_resp_refused_peers_total", "counter", "Redis-protocol connections refused",
        front->refused_peers);
}

void render_worker_pool(Exposition& e, const std::optional<WorkerPoolFigures>& pool) {
  if (!pool) return;
  const WorkerPoolFigures& w = *pool;
  e.one("ccpool_worker_pool_workers", "gauge",
        "Inductor compile workers of the node pool alive now", w.workers);
  e.one("ccpool_worker_pool_busy", "gauge", "Compile workers running a job now", w.busy);
  e.one("ccpool_worker_pool_rss_bytes", "gauge", "Resident memory of the compile workers now",
        w.rss_bytes);
  e.one("ccpool_worker_pool_sessions", "gauge", "Ranks with a pool session open now", w.sessions);
  e.one("ccpool_worker_pool_spawned_total", "counter", "Compile workers started", w.spawned);
  e.one("ccpool_worker_pool_jobs_total", "counter", "Compile jobs the node pool ran", w.jobs);
  e.one("ccpool_worker_pool_followed_total", "counter",
        "Compile jobs that ran after an equal job of another rank", w.followed);
  e.one("ccpool_worker_pool_failed_total", "counter",
        "Compile jobs the node pool could not run (the rank ran them)", w.failed);
  e.one("ccpool_worker_pool_cancelled_total", "counter", "Compile jobs withdrawn by their rank",
        w.cancelled);
  if (w.counts) {
    auto count = [&](const char* name) {
      auto it = w.counts->find(name);
      return it == w.counts->end() ? uint64_t{0} : it->second;
    };
    e.one("ccpool_worker_pool_triton_compiles_total", "counter",
          "Triton kernels compiled and stored by the pool", count("triton_compiles"));
    e.one("ccpool_worker_pool_triton_store_hits_total", "counter",
          "Triton kernels served from the node store", count("triton_store_hits"));
  }
}

void render_leases(Exposition& e, const std::optional<LeaseFigures>& leases) {
  if (!leases) return;
  const LeaseFigures& l = *leases;
  e.one("ccpool_leases_in_flight", "gauge",
        "Keys a client computes now (graph compiles, Triton kernels)", l.keys_in_flight);
  e.one("ccpool_lease_waiters", "gauge", "Clients waiting for another's value now", l.waiting);
  e.family("ccpool_lease_waits_total", "counter",
           "Waits for another client's value, by how they ended");
  e.sample("ccpool_lease_waits_total", {{"outcome", "served"}}, l.served);
  e.sample("ccpool_lease_waits_total", {{"outcome", "abandoned"}}, l.abandoned);
  e.sample("ccpool_lease_waits_total", {{"outcome", "timed_out"}}, l.timed_out);
}

}  // namespace

MetricsFormat format_for_accept(std::string_view accept) {
  // Each comma-separated media range; q=0 means "not acceptable".
  size_t pos = 0;
  while (pos <= accept.size()) {
    size_t end = accept.find(',', pos);
    std::string_view range =
        accept.substr(pos, end == std::string_view::npos ? accept.npos : end - pos);
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
  HistogramFigures h = histogram_figures(snapshot);
  return {{"le", h.le}, {"counts", h.counts}, {"sum_s", h.sum_s}};
}

std::string render_metrics(const ServiceStatus& status, MetricsFormat format) {
  Exposition e(format);
  e.family("ccpool_build_info", "info", "Version of the running service");
  e.sample("ccpool_build_info", {{"version", status.version}}, 1);
  e.family("ccpool_start_time_seconds", "gauge",
           "Start time of the service, seconds since the epoch");
  e.sample("ccpool_start_time_seconds", {}, status.start_time_s);
  render_requests(e, status);
  render_pool(e, status);
  render_store(e, status);
  render_cluster(e, status.cluster);
  render_tiers(e, status);
  render_front(e, status.front);
  render_worker_pool(e, status.worker_pool);
  render_leases(e, status.leases);
  return e.finish();
}

std::string render_metrics(const nlohmann::json& status, MetricsFormat format) {
  return render_metrics(status_from_json(status), format);
}

}  // namespace ccpool::service
