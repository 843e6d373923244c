// Service-wide counters shown by `ccpool status` (documented in docs/cli.md).
#pragma once

#include <atomic>
#include <cstdint>

#include "base/histogram.h"

namespace ccpool::service {

struct Counters {
  std::atomic<uint64_t> requests{0};     // exec requests received
  std::atomic<uint64_t> hits{0};         // served from the node store
  std::atomic<uint64_t> misses{0};       // not in the store: led an execution
  std::atomic<uint64_t> joins{0};        // joined an identical in-flight job
  std::atomic<uint64_t> join_reruns{0};  // joiners whose inputs differed from the leader's: ran their own
  std::atomic<uint64_t> executions{0};   // tool processes the pool started
  std::atomic<uint64_t> failures{0};     // executions that failed (exit != 0, timeout, signal)
  std::atomic<uint64_t> cancelled{0};    // jobs cancelled because every waiter left
  std::atomic<uint64_t> passthrough{0};  // uncacheable requests run without caching
  std::atomic<uint64_t> remote_hits{0};  // served from the cluster tier
  std::atomic<uint64_t> not_stored{0};   // successful results deliberately not stored
  std::atomic<uint64_t> store_errors{0}; // store writes that failed (result still served)
  std::atomic<uint64_t> service_errors{0};  // requests answered "failed": the client ran the tool itself
  std::atomic<uint64_t> stopping_replies{0};
  // Service-side time of local hits, from frame decoded to reply queued.
  std::atomic<uint64_t> hit_time_ns{0};
  Histogram hit_latency;  // the same time, per hit, for ccpool_hit_duration_seconds
};

}  // namespace ccpool::service
