// The figures of the service's status that /metrics renders, as one struct.
// The service fills it; write_status_json() writes its keys into the `ccpool status
// --json` object; render_metrics() (metrics.h) reads its fields, so renaming
// one is a compile error there, never a metric silently at zero.
// status_from_json() reads it back from a status object (`ccpool status
// --prometheus` gets the object over the socket) as a consumer of an older
// service would: a missing number is 0, a missing section is absent.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/histogram.h"

namespace ccpool::service {

// JSON: {"le": [bounds...], "counts": [per bucket, the last one +Inf], "sum_s": S}.
struct HistogramFigures {
  std::vector<double> le;
  std::vector<uint64_t> counts;
  double sum_s = 0;
  bool operator==(const HistogramFigures&) const = default;
};
HistogramFigures histogram_figures(const Histogram::Snapshot& snapshot);

// JSON: "store": {...}; null when the store could not be read.
struct StoreFigures {
  uint64_t entries = 0, stored_bytes = 0, logical_bytes = 0, max_size = 0;
  uint64_t evictions = 0, corrupt_evictions = 0, time_saved_ms = 0;
  bool operator==(const StoreFigures&) const = default;
};

// JSON: top-level "remote", "remote_*", "breaker_*" (written with or without a
// tier; rendered only with one).
struct ClusterFigures {
  bool remote = false;
  uint64_t hits = 0, misses = 0, errors = 0, writes = 0, invalid = 0, bad_signature = 0;
  bool breaker_open = false;
  uint64_t breaker_opened = 0;
  bool operator==(const ClusterFigures&) const = default;
};

// JSON: top-level "resp_*"; present only with the Redis-protocol front.
struct FrontFigures {
  uint64_t commands = 0, connections = 0, refused_peers = 0;
  bool operator==(const FrontFigures&) const = default;
};

// JSON: "worker_pool": {...}.
struct WorkerPoolFigures {
  uint64_t sessions = 0, workers = 0, busy = 0, rss_bytes = 0, spawned = 0;
  uint64_t jobs = 0, followed = 0, failed = 0, cancelled = 0;
  std::optional<std::map<std::string, uint64_t>> counts;  // summed result stats of the workers
  bool operator==(const WorkerPoolFigures&) const = default;
};

// JSON: "leases": {...}; present only with the Redis-protocol front.
struct LeaseFigures {
  uint64_t keys_in_flight = 0, waiting = 0, served = 0, abandoned = 0, timed_out = 0;
  bool operator==(const LeaseFigures&) const = default;
};

struct ServiceStatus {
  std::string version = "unknown";
  uint64_t start_time_s = 0;
  // Requests, by how they were served.
  uint64_t requests = 0, hits = 0, exec_remote_hits = 0, misses = 0, joins = 0;
  uint64_t passthrough = 0, not_stored = 0, service_errors = 0, fallbacks = 0;
  std::map<std::string, uint64_t> passthrough_reasons, not_stored_reasons;
  std::optional<HistogramFigures> hit_latency;
  // JSON "hit_stage_seconds": the hits' time summed per stage (service/counters.h HitStage).
  std::map<std::string, double> hit_stage_seconds;
  // The pool.
  uint64_t executions = 0, failures = 0, cancelled = 0, queued = 0, running = 0, peak_running = 0;
  uint64_t jobs = 0, mem_budget = 0, mem_reserved = 0;
  // Connections.
  uint64_t clients = 0, refused_peers = 0, protocol_errors = 0;
  uint64_t store_errors = 0;
  std::optional<StoreFigures> store;
  ClusterFigures cluster;
  std::map<std::string, std::optional<HistogramFigures>>
      tier_latency;  // by tier; nullopt: unreadable
  std::optional<FrontFigures> front;
  std::optional<WorkerPoolFigures> worker_pool;
  std::optional<LeaseFigures> leases;
  bool operator==(const ServiceStatus&) const = default;
};

// Writes the struct's keys into `j` (an object; its other keys are kept).
void write_status_json(nlohmann::json& j, const ServiceStatus& status);
ServiceStatus status_from_json(const nlohmann::json& j);

}  // namespace ccpool::service
