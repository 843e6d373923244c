// A fixed-bucket latency histogram for metrics. Any thread may observe into it
// without a lock: one relaxed atomic add for the bucket and one for the sum.
// Bucket upper bounds (seconds) are fixed so every histogram exports the same
// `le` labels; the last bucket is +Inf.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace ccpool {

class Histogram {
 public:
  // 50 us .. 10 s: a hit is tens of microseconds, a cluster round trip a few
  // milliseconds, a compile seconds.
  static constexpr size_t kBounds = 16;
  static constexpr std::array<double, kBounds> kUpperBounds = {
      0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
      0.025,   0.05,   0.1,     0.25,   0.5,   1.0,    2.5,   10.0};

  struct Snapshot {
    std::array<uint64_t, kBounds + 1> counts{};  // per bucket, not cumulative; [kBounds] is +Inf
    uint64_t sum_ns = 0;
    uint64_t count() const {
      uint64_t n = 0;
      for (uint64_t c : counts) n += c;
      return n;
    }
  };

  Histogram() = default;
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  void observe(std::chrono::nanoseconds d) {
    int64_t ns = d.count() < 0 ? 0 : d.count();
    double seconds = static_cast<double>(ns) / 1e9;
    size_t i = 0;
    while (i < kBounds && seconds > kUpperBounds[i]) ++i;
    m_counts[i].fetch_add(1, std::memory_order_relaxed);
    m_sum_ns.fetch_add(static_cast<uint64_t>(ns), std::memory_order_relaxed);
  }
  void observe_since(std::chrono::steady_clock::time_point start) {
    observe(std::chrono::steady_clock::now() - start);
  }

  // Counts and sum are read separately, so a snapshot taken during observes
  // may pair a count with a sum one observation apart; never torn per field.
  Snapshot snapshot() const {
    Snapshot s;
    for (size_t i = 0; i <= kBounds; ++i) s.counts[i] = m_counts[i].load(std::memory_order_relaxed);
    s.sum_ns = m_sum_ns.load(std::memory_order_relaxed);
    return s;
  }

 private:
  std::array<std::atomic<uint64_t>, kBounds + 1> m_counts{};
  std::atomic<uint64_t> m_sum_ns{0};
};

}  // namespace ccpool
