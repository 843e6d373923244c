#include "service/metrics.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>

#include "service/metrics_server.h"

namespace ccpool::service {
namespace {

nlohmann::json sample_status() {
  Histogram h;
  h.observe(std::chrono::microseconds(30));   // bucket le=0.00005
  h.observe(std::chrono::microseconds(700));  // le=0.001
  h.observe(std::chrono::seconds(20));        // +Inf
  nlohmann::json s = {{"version", "0.1.0"},  {"start_time_s", 1700000000},
                      {"hits", 5},           {"exec_remote_hits", 1},
                      {"misses", 2},         {"joins", 3},
                      {"passthrough", 4},    {"not_stored", 1},
                      {"service_errors", 0}, {"fallbacks", 6},
                      {"requests", 15},      {"executions", 7},
                      {"failures", 1},       {"queued", 2},
                      {"running", 1},        {"mem_budget", 1u << 30},
                      {"remote", false}};
  s["hit_latency"] = histogram_json(h.snapshot());
  s["store"] = {{"entries", 9}, {"stored_bytes", 4096}, {"time_saved_ms", 1500}, {"evictions", 2}};
  return s;
}

TEST(Metrics, TextFormatCountersGaugesAndHistogram) {
  std::string text = render_metrics(sample_status(), MetricsFormat::kPrometheusText);
  EXPECT_NE(text.find("# TYPE ccpool_requests_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("ccpool_requests_total{result=\"hit\"} 5\n"), std::string::npos);
  EXPECT_NE(text.find("ccpool_requests_total{result=\"remote_hit\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("ccpool_requests_total{result=\"pass_through\"} 4\n"), std::string::npos);
  EXPECT_NE(text.find("ccpool_requests_total{result=\"fallback\"} 6\n"), std::string::npos);
  EXPECT_NE(text.find("ccpool_queue_depth 2\n"), std::string::npos);
  EXPECT_NE(text.find("ccpool_memory_budget_bytes 1073741824\n"), std::string::npos);
  EXPECT_NE(text.find("ccpool_store_entries 9\n"), std::string::npos);
  EXPECT_NE(text.find("ccpool_time_saved_seconds_total 1.5\n"), std::string::npos);
  // Cumulative buckets; +Inf equals _count.
  EXPECT_NE(text.find("ccpool_hit_duration_seconds_bucket{le=\"0.00005\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("ccpool_hit_duration_seconds_bucket{le=\"0.001\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("ccpool_hit_duration_seconds_bucket{le=\"10\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("ccpool_hit_duration_seconds_bucket{le=\"+Inf\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("ccpool_hit_duration_seconds_count 3\n"), std::string::npos);
  EXPECT_NE(text.find("ccpool_hit_duration_seconds_sum 20.00073\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE ccpool_build_info gauge\n"), std::string::npos);
  // No cluster tier configured: no cluster series; no EOF marker in text format.
  EXPECT_EQ(text.find("ccpool_cluster_"), std::string::npos);
  EXPECT_EQ(text.find("# EOF"), std::string::npos);
}

TEST(Metrics, OpenMetricsNamesFamiliesWithoutTotalAndEnds) {
  nlohmann::json s = sample_status();
  s["remote"] = true;
  s["breaker_open"] = true;
  std::string om = render_metrics(s, MetricsFormat::kOpenMetrics);
  EXPECT_NE(om.find("# TYPE ccpool_requests counter\n"), std::string::npos);
  EXPECT_NE(om.find("ccpool_requests_total{result=\"hit\"} 5\n"), std::string::npos);
  EXPECT_NE(om.find("# TYPE ccpool_build info\n"), std::string::npos);
  EXPECT_NE(om.find("ccpool_build_info{version=\"0.1.0\"} 1\n"), std::string::npos);
  EXPECT_NE(om.find("ccpool_cluster_breaker_open 1\n"), std::string::npos);
  EXPECT_TRUE(om.ends_with("# EOF\n"));
}

TEST(Metrics, ReasonCountsBecomeLabelsAndAreEscaped) {
  nlohmann::json s = sample_status();
  s["passthrough_reasons"] = {{"has_include_nonliteral", 3}, {"odd\"code\\", 1}};
  std::string text = render_metrics(s, MetricsFormat::kPrometheusText);
  EXPECT_NE(
      text.find(
          "ccpool_requests_total{result=\"pass_through\",reason=\"has_include_nonliteral\"} 3\n"),
      std::string::npos);
  EXPECT_NE(text.find("reason=\"odd\\\"code\\\\\"} 1\n"), std::string::npos);
  EXPECT_EQ(text.find("ccpool_requests_total{result=\"pass_through\"} "), std::string::npos);
  // passthrough is 4, the reasons cover 4: nothing unspecified.
  EXPECT_EQ(text.find("result=\"pass_through\",reason=\"unspecified\""), std::string::npos);
  s["not_stored"] = 5;
  s["not_stored_reasons"] = {{"input_changed", 2}};
  text = render_metrics(s, MetricsFormat::kPrometheusText);
  EXPECT_NE(text.find("ccpool_requests_total{result=\"not_stored\",reason=\"input_changed\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("ccpool_requests_total{result=\"not_stored\",reason=\"unspecified\"} 3\n"),
            std::string::npos);
}

TEST(Metrics, WorkerPoolAndLeases) {
  nlohmann::json s = sample_status();
  s["worker_pool"] = {
      {"workers", 2},      {"busy", 1},
      {"rss_bytes", 4096}, {"sessions", 4},
      {"spawned", 3},      {"jobs", 12},
      {"followed", 9},     {"failed", 0},
      {"cancelled", 1},    {"counts", {{"triton_compiles", 4}, {"triton_store_hits", 12}}}};
  s["leases"] = {
      {"keys_in_flight", 1}, {"waiting", 3}, {"served", 6}, {"abandoned", 1}, {"timed_out", 0}};
  std::string text = render_metrics(s, MetricsFormat::kPrometheusText);
  EXPECT_NE(text.find("ccpool_worker_pool_workers 2\n"), std::string::npos);
  EXPECT_NE(text.find("ccpool_worker_pool_jobs_total 12\n"), std::string::npos);
  EXPECT_NE(text.find("ccpool_worker_pool_followed_total 9\n"), std::string::npos);
  EXPECT_NE(text.find("ccpool_worker_pool_triton_compiles_total 4\n"), std::string::npos);
  EXPECT_NE(text.find("ccpool_worker_pool_triton_store_hits_total 12\n"), std::string::npos);
  EXPECT_NE(text.find("ccpool_lease_waiters 3\n"), std::string::npos);
  EXPECT_NE(text.find("ccpool_lease_waits_total{outcome=\"served\"} 6\n"), std::string::npos);
  EXPECT_NE(text.find("ccpool_lease_waits_total{outcome=\"abandoned\"} 1\n"), std::string::npos);
  // Without them (an older status), no series at all.
  EXPECT_EQ(
      render_metrics(sample_status(), MetricsFormat::kPrometheusText).find("ccpool_worker_pool"),
      std::string::npos);
}

TEST(Metrics, TierLatencyIsOneFamilyLabelledByTier) {
  Histogram node, cluster;
  node.observe(std::chrono::microseconds(40));
  cluster.observe(std::chrono::milliseconds(2));
  cluster.observe(std::chrono::milliseconds(3));
  nlohmann::json s = sample_status();
  s["tier_latency"] = {{"node", histogram_json(node.snapshot())},
                       {"cluster", histogram_json(cluster.snapshot())}};
  std::string text = render_metrics(s, MetricsFormat::kPrometheusText);
  size_t type = text.find("# TYPE ccpool_tier_lookup_duration_seconds histogram\n");
  ASSERT_NE(type, std::string::npos);
  EXPECT_EQ(text.find("# TYPE ccpool_tier_lookup_duration_seconds", type + 1), std::string::npos);
  EXPECT_NE(
      text.find("ccpool_tier_lookup_duration_seconds_bucket{tier=\"node\",le=\"0.00005\"} 1\n"),
      std::string::npos);
  EXPECT_NE(
      text.find("ccpool_tier_lookup_duration_seconds_bucket{tier=\"cluster\",le=\"0.0025\"} 1\n"),
      std::string::npos);
  EXPECT_NE(text.find("ccpool_tier_lookup_duration_seconds_count{tier=\"cluster\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("ccpool_tier_lookup_duration_seconds_sum{tier=\"cluster\"} 0.005\n"),
            std::string::npos);
}

TEST(Metrics, AcceptHeaderPicksTheFormat) {
  EXPECT_EQ(format_for_accept(""), MetricsFormat::kPrometheusText);
  EXPECT_EQ(format_for_accept("text/plain;version=0.0.4"), MetricsFormat::kPrometheusText);
  EXPECT_EQ(format_for_accept("application/openmetrics-text;version=1.0.0,text/plain;q=0.5"),
            MetricsFormat::kOpenMetrics);
  EXPECT_EQ(format_for_accept("text/plain, application/openmetrics-text;q=0"),
            MetricsFormat::kPrometheusText);
}

TEST(Metrics, RequestParsing) {
  MetricsServer::Render render = [](MetricsFormat f) {
    return std::string(f == MetricsFormat::kOpenMetrics ? "om\n" : "text\n");
  };
  std::string ok = metrics_reply("GET /metrics HTTP/1.1\r\nHost: x\r\n", render);
  EXPECT_TRUE(ok.starts_with("HTTP/1.1 200 OK\r\n"));
  EXPECT_NE(ok.find("Content-Length: 5\r\n"), std::string::npos);
  EXPECT_TRUE(ok.ends_with("\r\n\r\ntext\n"));
  std::string om = metrics_reply(
      "GET /metrics?x=1 HTTP/1.1\r\naCCept: application/openmetrics-text\r\n", render);
  EXPECT_TRUE(om.ends_with("\r\n\r\nom\n"));
  std::string head = metrics_reply("HEAD /metrics HTTP/1.0\r\n", render);
  EXPECT_TRUE(head.ends_with("Content-Length: 5\r\nConnection: close\r\n\r\n"));
  EXPECT_TRUE(metrics_reply("GET / HTTP/1.1\r\n", render).starts_with("HTTP/1.1 404"));
  EXPECT_TRUE(metrics_reply("DELETE /metrics HTTP/1.1\r\n", render).starts_with("HTTP/1.1 405"));
  EXPECT_TRUE(metrics_reply("garbage\r\n", render).starts_with("HTTP/1.1 400"));
  EXPECT_TRUE(metrics_reply("GET /metrics SPDY/3\r\n", render).starts_with("HTTP/1.1 400"));
}

int connect_loopback(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return -1;
  return fd;
}

std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

TEST(MetricsServer, ServesScrapesAndStopsWithIdleConnectionsOpen) {
  std::atomic<int> renders{0};
  auto server = MetricsServer::start(0, [&](MetricsFormat) {
    ++renders;
    return std::string("ccpool_up 1\n");
  });
  ASSERT_TRUE(server) << server.error().message;
  int port = (*server)->port();
  ASSERT_GT(port, 0);
  int idle = connect_loopback(port);  // never sends: must not hold up others
  ASSERT_GE(idle, 0);
  for (int i = 0; i < 3; ++i) {
    int fd = connect_loopback(port);
    ASSERT_GE(fd, 0);
    std::string req = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    ASSERT_EQ(::write(fd, req.data(), req.size()), static_cast<ssize_t>(req.size()));
    std::string reply = read_all(fd);  // the server closes after one reply
    ::close(fd);
    EXPECT_TRUE(reply.starts_with("HTTP/1.1 200 OK\r\n")) << reply;
    EXPECT_TRUE(reply.ends_with("\r\n\r\nccpool_up 1\n")) << reply;
  }
  EXPECT_EQ(renders.load(), 3);
  server->reset();  // joins its thread although a connection is still open
  ::close(idle);
  EXPECT_LT(connect_loopback(port), 0);
}

TEST(MetricsServer, PortInUseIsAClearError) {
  auto first = MetricsServer::start(0, [](MetricsFormat) { return std::string(); });
  ASSERT_TRUE(first);
  auto second = MetricsServer::start((*first)->port(), [](MetricsFormat) { return std::string(); });
  ASSERT_FALSE(second);
  EXPECT_NE(
      second.error().message.find("cannot listen on 127.0.0.1:" + std::to_string((*first)->port())),
      std::string::npos);
  EXPECT_NE(second.error().message.find("pick another --metrics-port"), std::string::npos);
}

TEST(Histogram, BucketsAndSum) {
  Histogram h;
  h.observe(std::chrono::nanoseconds(-5));   // clamped to 0
  h.observe(std::chrono::microseconds(50));  // exactly on a bound: that bucket
  h.observe(std::chrono::milliseconds(3));
  auto s = h.snapshot();
  EXPECT_EQ(s.count(), 3u);
  EXPECT_EQ(s.counts[0], 2u);
  EXPECT_EQ(s.counts[6], 1u);  // le=0.005
  EXPECT_EQ(s.sum_ns, 3'050'000u);
}

}  // namespace
}  // namespace ccpool::service
