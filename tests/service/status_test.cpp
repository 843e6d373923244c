// The status struct is what /metrics renders: every metric carries the value
// of its field, and the JSON object `ccpool status` prints reads back to the
// same struct (so `ccpool status --prometheus` prints what /metrics serves).
#include "service/status.h"

#include <gtest/gtest.h>

#include "service/metrics.h"

namespace ccpool::service {
namespace {

// Every number different, every section present.
ServiceStatus distinct_status() {
  uint64_t next = 100;
  auto n = [&] { return next++; };
  ServiceStatus s;
  s.version = "9.9.9";
  s.start_time_s = n();
  s.requests = n(), s.hits = n(), s.exec_remote_hits = n(), s.misses = n(), s.joins = n();
  s.passthrough = n(), s.not_stored = n(), s.service_errors = n(), s.fallbacks = n();
  s.passthrough_reasons = {
      {"argv_unknown", 7}};  // fewer than passthrough: the rest is "unspecified"
  s.not_stored_reasons = {{"input_changed", n()}};
  s.hit_latency = HistogramFigures{{0.001, 0.01}, {n(), n(), n()}, 2.5};
  s.hit_stage_seconds = {{"handoff", 0.5}, {"lookup", 1.25}};
  s.executions = n(), s.failures = n(), s.cancelled = n(), s.queued = n(), s.running = n();
  s.peak_running = n(), s.jobs = n(), s.mem_budget = n(), s.mem_reserved = n();
  s.clients = n(), s.refused_peers = n(), s.protocol_errors = n(), s.store_errors = n();
  s.store = StoreFigures{n(), n(), n(), n(), n(), n(), 1500};
  s.cluster = ClusterFigures{true, n(), n(), n(), n(), n(), n(), true, n()};
  s.tier_latency["node"] = HistogramFigures{{0.001}, {n(), n()}, 0.25};
  s.tier_latency["cluster"] = HistogramFigures{{0.001}, {n(), n()}, 0.5};
  s.front = FrontFigures{n(), n(), n()};
  s.worker_pool = WorkerPoolFigures{
      n(), n(),
      n(), n(),
      n(), n(),
      n(), n(),
      n(), std::map<std::string, uint64_t>{{"triton_compiles", n()}, {"triton_store_hits", n()}}};
  s.leases = LeaseFigures{n(), n(), n(), n(), n()};
  return s;
}

TEST(Status, EachMetricHasTheValueOfItsField) {
  ServiceStatus s = distinct_status();
  std::string text = render_metrics(s, MetricsFormat::kPrometheusText);
  auto line = [](const std::string& series, uint64_t value) {
    return series + " " + std::to_string(value) + "\n";
  };
  const WorkerPoolFigures& w = *s.worker_pool;
  const std::vector<std::string> expected = {
      line("ccpool_build_info{version=\"9.9.9\"}", 1),
      line("ccpool_start_time_seconds", s.start_time_s),
      line("ccpool_requests_total{result=\"hit\"}", s.hits),
      line("ccpool_requests_total{result=\"remote_hit\"}", s.exec_remote_hits),
      line("ccpool_requests_total{result=\"miss\"}", s.misses),
      line("ccpool_requests_total{result=\"join\"}", s.joins),
      line("ccpool_requests_total{result=\"pass_through\",reason=\"argv_unknown\"}",
           s.passthrough_reasons.at("argv_unknown")),
      line("ccpool_requests_total{result=\"pass_through\",reason=\"unspecified\"}",
           s.passthrough - s.passthrough_reasons.at("argv_unknown")),
      line("ccpool_requests_total{result=\"not_stored\",reason=\"input_changed\"}",
           s.not_stored_reasons.at("input_changed")),
      line("ccpool_requests_total{result=\"failed\"}", s.service_errors),
      line("ccpool_requests_total{result=\"fallback\"}", s.fallbacks),
      line("ccpool_requests_received_total", s.requests),
      "ccpool_hit_stage_seconds_total{stage=\"handoff\"} 0.5\n",
      "ccpool_hit_stage_seconds_total{stage=\"lookup\"} 1.25\n",
      line("ccpool_hit_duration_seconds_bucket{le=\"0.001\"}", s.hit_latency->counts[0]),
      line("ccpool_hit_duration_seconds_count",
           s.hit_latency->counts[0] + s.hit_latency->counts[1] + s.hit_latency->counts[2]),
      "ccpool_hit_duration_seconds_sum 2.5\n",
      line("ccpool_executions_total", s.executions),
      line("ccpool_execution_failures_total", s.failures),
      line("ccpool_executions_cancelled_total", s.cancelled),
      line("ccpool_queue_depth", s.queued),
      line("ccpool_running_jobs", s.running),
      line("ccpool_running_jobs_peak", s.peak_running),
      line("ccpool_pool_slots", s.jobs),
      line("ccpool_memory_budget_bytes", s.mem_budget),
      line("ccpool_memory_reserved_bytes", s.mem_reserved),
      line("ccpool_clients", s.clients),
      line("ccpool_refused_peers_total", s.refused_peers),
      line("ccpool_protocol_errors_total", s.protocol_errors),
      line("ccpool_store_entries", s.store->entries),
      line("ccpool_store_bytes", s.store->stored_bytes),
      line("ccpool_store_logical_bytes", s.store->logical_bytes),
      line("ccpool_store_max_bytes", s.store->max_size),
      line("ccpool_store_evictions_total", s.store->evictions),
      line("ccpool_store_corrupt_evictions_total", s.store->corrupt_evictions),
      line("ccpool_store_write_errors_total", s.store_errors),
      "ccpool_time_saved_seconds_total 1.5\n",
      line("ccpool_cluster_hits_total", s.cluster.hits),
      line("ccpool_cluster_misses_total", s.cluster.misses),
      line("ccpool_cluster_errors_total", s.cluster.errors),
      line("ccpool_cluster_writes_total", s.cluster.writes),
      line("ccpool_cluster_invalid_total", s.cluster.invalid + s.cluster.bad_signature),
      line("ccpool_cluster_breaker_open", 1),
      line("ccpool_cluster_breaker_opened_total", s.cluster.breaker_opened),
      line("ccpool_tier_lookup_duration_seconds_count{tier=\"node\"}",
           s.tier_latency["node"]->counts[0] + s.tier_latency["node"]->counts[1]),
      line("ccpool_tier_lookup_duration_seconds_bucket{tier=\"cluster\",le=\"0.001\"}",
           s.tier_latency["cluster"]->counts[0]),
      line("ccpool_resp_commands_total", s.front->commands),
      line("ccpool_resp_connections_total", s.front->connections),
      line("ccpool_resp_refused_peers_total", s.front->refused_peers),
      line("ccpool_worker_pool_workers", w.workers),
      line("ccpool_worker_pool_busy", w.busy),
      line("ccpool_worker_pool_rss_bytes", w.rss_bytes),
      line("ccpool_worker_pool_sessions", w.sessions),
      line("ccpool_worker_pool_spawned_total", w.spawned),
      line("ccpool_worker_pool_jobs_total", w.jobs),
      line("ccpool_worker_pool_followed_total", w.followed),
      line("ccpool_worker_pool_failed_total", w.failed),
      line("ccpool_worker_pool_cancelled_total", w.cancelled),
      line("ccpool_worker_pool_triton_compiles_total", w.counts->at("triton_compiles")),
      line("ccpool_worker_pool_triton_store_hits_total", w.counts->at("triton_store_hits")),
      line("ccpool_leases_in_flight", s.leases->keys_in_flight),
      line("ccpool_lease_waiters", s.leases->waiting),
      line("ccpool_lease_waits_total{outcome=\"served\"}", s.leases->served),
      line("ccpool_lease_waits_total{outcome=\"abandoned\"}", s.leases->abandoned),
      line("ccpool_lease_waits_total{outcome=\"timed_out\"}", s.leases->timed_out),
  };
  for (const std::string& l : expected) EXPECT_NE(text.find("\n" + l), std::string::npos) << l;
  // No other sample: every line not a comment or a histogram's is listed above.
  ASSERT_TRUE(text.ends_with("\n"));
  size_t samples = 0;
  for (size_t pos = 0; pos < text.size(); pos = text.find('\n', pos) + 1) {
    if (text[pos] != '#' && text.compare(pos, 28, "ccpool_hit_duration_seconds_") != 0 &&
        text.compare(pos, 36, "ccpool_tier_lookup_duration_seconds_") != 0) {
      ++samples;
    }
  }
  EXPECT_EQ(samples, expected.size() - 5);  // less the five histogram lines listed
}

TEST(Status, JsonReadsBackToTheSameStruct) {
  ServiceStatus s = distinct_status();
  nlohmann::json j = nlohmann::json::object();
  write_status_json(j, s);
  EXPECT_EQ(status_from_json(j), s);
  s.store.reset();
  s.front.reset();
  s.leases.reset();
  s.worker_pool.reset();
  s.cluster.remote = false;
  j = nlohmann::json::object();
  write_status_json(j, s);
  EXPECT_TRUE(j["store"].is_null());
  EXPECT_FALSE(j.contains("resp_commands"));
  EXPECT_EQ(status_from_json(j), s);
}

TEST(Status, ScrapeAndStatusPrometheusPrintTheSameBytes) {
  ServiceStatus s = distinct_status();
  nlohmann::json j = nlohmann::json::object();
  write_status_json(j, s);
  nlohmann::json over_the_socket = nlohmann::json::parse(j.dump());
  for (MetricsFormat f : {MetricsFormat::kPrometheusText, MetricsFormat::kOpenMetrics}) {
    EXPECT_EQ(render_metrics(over_the_socket, f), render_metrics(s, f));
  }
}

}  // namespace
}  // namespace ccpool::service
