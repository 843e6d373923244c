#include "resp/auth_budget.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace ccpool::resp {

int64_t AuthBudget::locked_for(int64_t now_ms) {
  MutexLock lock(&m_mutex);
  return m_locked_until > now_ms ? m_locked_until - now_ms : 0;
}

void AuthBudget::failed(int64_t now_ms) {
  int64_t lockout = 0;
  uint64_t lockouts = 0;
  {
    MutexLock lock(&m_mutex);
    if (m_last_failure != 0 && now_ms - m_last_failure >= kForgetMs) {
      m_failures = 0;
      m_next_lockout = kFirstLockoutMs;
    }
    m_last_failure = now_ms;
    if (++m_failures < kFailures) return;
    m_failures = 0;
    lockout = m_next_lockout;
    m_locked_until = now_ms + lockout;
    m_next_lockout = std::min(m_next_lockout * 2, kMaxLockoutMs);
    lockouts = ++m_lockouts;
  }
  spdlog::warn(
      "resp: {} wrong AUTH passwords on the Redis front; AUTH is refused on every connection for "
      "{} ms "
      "(lockout {}; it doubles up to {} s while wrong passwords keep coming). Someone may be "
      "guessing "
      "the --resp-password-file password",
      kFailures, lockout, lockouts, kMaxLockoutMs / 1000);
}

uint64_t AuthBudget::lockouts() const {
  MutexLock lock(&m_mutex);
  return m_lockouts;
}

}  // namespace ccpool::resp
