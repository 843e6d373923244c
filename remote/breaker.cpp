#include "remote/breaker.h"

#include <algorithm>

namespace ccpool::remote {

CircuitBreaker::CircuitBreaker(int failures, std::chrono::milliseconds cooldown, Clock clock)
    : m_threshold(std::max(1, failures)), m_cooldown(cooldown), m_clock(std::move(clock)) {}

bool CircuitBreaker::allow() {
  MutexLock lock(&m_mutex);
  if (!m_open) return true;
  TimePoint t = now();
  if (t < m_reopen_at) return false;
  // One probe per cooldown: a probe that never reported (a bug upstream)
  // cannot wedge the breaker, because the next cooldown allows another.
  m_reopen_at = t + m_cooldown;
  return true;
}

void CircuitBreaker::record_success() {
  MutexLock lock(&m_mutex);
  m_failures = 0;
  m_open = false;
}

void CircuitBreaker::record_failure() {
  MutexLock lock(&m_mutex);
  ++m_failures;
  if (m_open) {
    m_reopen_at = now() + m_cooldown;
    return;
  }
  if (m_failures >= m_threshold) {
    m_open = true;
    m_reopen_at = now() + m_cooldown;
    ++m_times_opened;
  }
}

bool CircuitBreaker::is_open() const {
  MutexLock lock(&m_mutex);
  return m_open;
}

uint64_t CircuitBreaker::times_opened() const {
  MutexLock lock(&m_mutex);
  return m_times_opened;
}

}  // namespace ccpool::remote
