// Circuit breaker for the remote tier: after N consecutive transport failures
// no Redis call is made for `cooldown`; then exactly one caller probes, and
// its outcome closes the breaker or opens it for another cooldown.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

#include "base/thread_annotations.h"

namespace ccpool::remote {

class CircuitBreaker {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  using Clock = std::function<TimePoint()>;  // seam for tests; default steady_clock

  CircuitBreaker(int failures, std::chrono::milliseconds cooldown, Clock clock = {});

  // True: the caller may call Redis and must then report record_success() or
  // record_failure(). False: the breaker is open (or a probe is in flight).
  bool allow();
  void record_success();
  void record_failure();

  bool is_open() const;           // open or probing
  uint64_t times_opened() const;  // closed -> open transitions

 private:
  TimePoint now() const { return m_clock ? m_clock() : std::chrono::steady_clock::now(); }

  const int m_threshold;
  const std::chrono::milliseconds m_cooldown;
  const Clock m_clock;
  mutable Mutex m_mutex;
  int m_failures GUARDED_BY(m_mutex) = 0;
  bool m_open GUARDED_BY(m_mutex) = false;
  TimePoint m_reopen_at GUARDED_BY(m_mutex){};  // when a probe may go
  uint64_t m_times_opened GUARDED_BY(m_mutex) = 0;
};

}  // namespace ccpool::remote
