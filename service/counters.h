// Service-wide counters shown by `ccpool status` (documented in docs/cli.md).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "base/histogram.h"
#include "base/thread_annotations.h"

namespace ccpool::service {

// Counts per stable reason code (docs/cache-keys.md). Codes carry at most a
// short detail taken from the command line (`unknown_option:-Xfoo`), so the
// map is bounded: past kMaxCodes distinct codes, new ones count as "other".
class ReasonCounts {
 public:
  static constexpr size_t kMaxCodes = 256;
  void add(std::string_view code) {
    MutexLock lock(&m_mutex);
    auto it = m_counts.find(code);
    if (it != m_counts.end()) {
      ++it->second;
    } else if (m_counts.size() < kMaxCodes) {
      m_counts.emplace(std::string(code), 1);
    } else {
      ++m_counts["other"];
    }
  }
  std::map<std::string, uint64_t> snapshot() const {
    MutexLock lock(&m_mutex);
    return {m_counts.begin(), m_counts.end()};
  }

 private:
  mutable Mutex m_mutex;
  std::map<std::string, uint64_t, std::less<>> m_counts GUARDED_BY(m_mutex);
};

struct Counters {
  std::atomic<uint64_t> requests{0};  // exec requests received
  std::atomic<uint64_t> hits{0};      // served from the node store
  std::atomic<uint64_t> misses{0};    // not in the store: led an execution
  std::atomic<uint64_t> joins{0};     // joined an identical in-flight job
  std::atomic<uint64_t> join_reruns{
      0};  // joiners whose inputs differed from the leader's: ran their own
  std::atomic<uint64_t> executions{0};    // tool processes the pool started
  std::atomic<uint64_t> failures{0};      // executions that failed (exit != 0, timeout, signal)
  std::atomic<uint64_t> cancelled{0};     // jobs cancelled because every waiter left
  std::atomic<uint64_t> passthrough{0};   // uncacheable requests run without caching
  std::atomic<uint64_t> remote_hits{0};   // served from the cluster tier
  std::atomic<uint64_t> not_stored{0};    // successful results deliberately not stored
  std::atomic<uint64_t> store_errors{0};  // store writes that failed (result still served)
  std::atomic<uint64_t> service_errors{
      0};  // requests answered "failed": the client ran the tool itself
  std::atomic<uint64_t> stopping_replies{0};
  // Service-side time of each node-store hit served on arrival, from frame
  // decoded to reply queued (`hit_service_us`, ccpool_hit_duration_seconds).
  // Cluster-tier hits are not in it, nor joiners served from the store after
  // waiting for a leader: their time is a round trip or a wait, not a hit's.
  Histogram hit_latency;
  // `passthrough` and `not_stored` split by reason code; each snapshot() is a
  // plain std::map<std::string, uint64_t> (status JSON, metrics exporters).
  ReasonCounts passthrough_reasons;
  ReasonCounts not_stored_reasons;
};

}  // namespace ccpool::service
