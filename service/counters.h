// Service-wide counters shown by `ccpool status` (documented in docs/cli.md).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
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

// Where the service's time of a node-store hit goes, summed over the hits in
// `hit_latency` (status JSON `hit_stages_us` and `hit_stage_seconds`,
// ccpool_hit_stage_seconds_total): the hand-off from the I/O thread that
// decoded the request to the request thread that runs it, planning, the
// manifest lookup, reading the entry from the store, writing the outputs,
// and sending the reply. The two wake-ups
// outside the service (the I/O thread on the client's connect, the client on
// the reply) are the client's round trip less these (scripts/hit_breakdown.sh).
enum class HitStage { kHandoff, kPlan, kLookup, kFetch, kDeliver, kReply, kCount };
constexpr std::array<const char*, static_cast<size_t>(HitStage::kCount)> kHitStageNames = {
    "handoff", "plan", "lookup", "fetch", "deliver", "reply"};

// Where a miss's service-side time goes, for a flight that ran its tool and
// stored the result (status JSON `miss_stages_us`, `timed_misses`): `start`
// (the leader's request to the tool's spawn: planning, the manifest lookup,
// the pool's admission, the work dir), `run` (the tool, traced), `handoff`
// (its exit to the request thread that concludes it), `collect` (reading the
// outputs and the record, hashing what the tool read, learning the entry's
// facts), `store` (the result and its manifest committed), `deliver` (writing
// every waiter's outputs and replying). Everything but `run` is ccpool's
// overhead on a cold build.
enum class MissStage { kStart, kRun, kHandoff, kCollect, kStore, kDeliver, kCount };
constexpr std::array<const char*, static_cast<size_t>(MissStage::kCount)> kMissStageNames = {
    "start", "run", "handoff", "collect", "store", "deliver"};

// One request's stage times, taken on the threads that serve it and added to
// the service's sums only when it counts (a node-store hit; a stored miss).
template <typename Stage>
class StageTimer {
 public:
  using Clock = std::chrono::steady_clock;
  explicit StageTimer(Clock::time_point start) : m_last(start) {}
  // The time since the previous mark (or the start) is `stage`'s.
  void mark(Stage stage) { mark_at(stage, Clock::now()); }
  // The same, for a stage that ended at `at` (on another thread).
  void mark_at(Stage stage, Clock::time_point at) {
    if (at < m_last) at = m_last;
    m_ns[static_cast<size_t>(stage)] += static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(at - m_last).count());
    m_last = at;
  }
  const std::array<uint64_t, static_cast<size_t>(Stage::kCount)>& ns() const { return m_ns; }

 private:
  Clock::time_point m_last;
  std::array<uint64_t, static_cast<size_t>(Stage::kCount)> m_ns{};
};
using HitTimer = StageTimer<HitStage>;
using MissTimer = StageTimer<MissStage>;

struct Counters {
  std::atomic<uint64_t> requests{0};           // exec requests received
  std::atomic<uint64_t> hits{0};               // served from the node store
  std::atomic<uint64_t> hits_on_io_thread{0};  // of `hits`: served without a hand-off
  // finished runs held by CCPOOL_FAULT=delay_finish (counted once the tool exited)
  std::atomic<uint64_t> fault_holds{0};
  std::atomic<uint64_t> misses{0};  // not in the store: led an execution
  std::atomic<uint64_t> joins{0};   // joined an identical in-flight job
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
  std::array<std::atomic<uint64_t>, kHitStageNames.size()> hit_stage_ns{};
  void add_hit_stages(const HitTimer& timer) {
    for (size_t i = 0; i < kHitStageNames.size(); ++i)
      hit_stage_ns[i].fetch_add(timer.ns()[i], std::memory_order_relaxed);
  }
  std::atomic<uint64_t> timed_misses{0};  // the misses in miss_stage_ns
  std::array<std::atomic<uint64_t>, kMissStageNames.size()> miss_stage_ns{};
  void add_miss_stages(const MissTimer& timer) {
    for (size_t i = 0; i < kMissStageNames.size(); ++i)
      miss_stage_ns[i].fetch_add(timer.ns()[i], std::memory_order_relaxed);
    timed_misses.fetch_add(1, std::memory_order_relaxed);
  }
  // `passthrough` and `not_stored` split by reason code; each snapshot() is a
  // plain std::map<std::string, uint64_t> (status JSON, metrics exporters).
  ReasonCounts passthrough_reasons;
  ReasonCounts not_stored_reasons;
};

}  // namespace ccpool::service
