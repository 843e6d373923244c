// The front-wide budget of wrong AUTH passwords. A connection closes after
// kMaxAuthFailures wrong passwords, but a client that reconnects could still
// try thousands a second. So every connection of one Front shares this
// budget: after kFailures wrong passwords, AUTH is refused (without looking
// at the password, even a right one) for a lockout that starts at
// kFirstLockoutMs and doubles with each further lockout up to kMaxLockoutMs;
// kForgetMs without a wrong password forgets the history. Each lockout is
// logged. A guesser so gets about kFailures tries per kMaxLockoutMs; the
// price is that the rightful user's AUTH waits out a lockout too.
// Thread-safe; times are the SharedState clock's (unix ms).
#pragma once

#include <cstdint>

#include "base/thread_annotations.h"

namespace ccpool::resp {

class AuthBudget {
 public:
  static constexpr int kFailures = 10;
  static constexpr int64_t kFirstLockoutMs = 1000;
  static constexpr int64_t kMaxLockoutMs = 60'000;
  static constexpr int64_t kForgetMs = 10 * 60'000;

  // 0 when a password may be checked now; else the milliseconds left of the lockout.
  int64_t locked_for(int64_t now_ms);
  // A wrong password was given at now_ms.
  void failed(int64_t now_ms);

  uint64_t lockouts() const;

 private:
  mutable Mutex m_mutex;
  int m_failures GUARDED_BY(m_mutex) = 0;
  int64_t m_locked_until GUARDED_BY(m_mutex) = 0;
  int64_t m_next_lockout GUARDED_BY(m_mutex) = kFirstLockoutMs;
  int64_t m_last_failure GUARDED_BY(m_mutex) = 0;
  uint64_t m_lockouts GUARDED_BY(m_mutex) = 0;
};

}  // namespace ccpool::resp
