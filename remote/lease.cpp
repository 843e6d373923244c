// Cross-node single-flight: leases in Redis, their renewal thread, and the
// bounded wait for another node's result.
#include <thread>

#include "remote/tier_impl.h"

namespace ccpool::remote {
namespace {

// Extends the lease only while it still holds our token.
constexpr const char* kRenewScript =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) "
    "else return 0 end";

// One atomic look at value and lease: {1, value} when the value exists,
// {0} while the lease is held without a value, {2} when both are gone. The
// value is cut after byte ARGV[1] (see TierImpl::get), so a huge one is never
// sent whole.
constexpr const char* kPollScript =
    "if redis.call('EXISTS', KEYS[1]) == 1 then "
    "return {1, redis.call('GETRANGE', KEYS[1], 0, ARGV[1])} end "
    "if redis.call('EXISTS', KEYS[2]) == 1 then return {0} end "
    "return {2}";

}  // namespace

bool TierImpl::is_held(const Digest& key) const {
  MutexLock lock(&m_lease_mutex);
  return m_held.count(key) != 0;
}

LeaseState TierImpl::acquire_lease(const Digest& key) {
  // Another thread of this node holds it: to the caller that is "another holder".
  if (is_held(key)) return LeaseState::kHeldByOther;
  std::string name = lease_key(key);
  std::string ttl = std::to_string(m_options.lease_ttl.count());
  auto reply = call({"SET", name, m_token, "NX", "PX", ttl}, nullptr);
  if (!reply) return LeaseState::kUnavailable;
  if (reply->type == Reply::Type::kNil) {
    // Our leases always carry a TTL; one without (PTTL -1) would never expire.
    auto ttl = call({"PTTL", name}, nullptr);
    if (ttl && ttl->type == Reply::Type::kInteger && ttl->integer == -1) {
      ++m_counters.lease_untimed;
      return LeaseState::kUnavailable;
    }
    return LeaseState::kHeldByOther;
  }
  {
    MutexLock lock(&m_lease_mutex);
    m_held.insert(key);
  }
  ++m_counters.lease_acquired;
  return LeaseState::kAcquired;
}

std::optional<std::string> TierImpl::wait_for_result(const Digest& key,
                                                     std::chrono::milliseconds max_wait) {
  ++m_counters.lease_waits;
  auto deadline = std::chrono::steady_clock::now() + max_wait;
  std::string value_name = value_key(key);
  std::string lease_name = lease_key(key);
  std::string last = std::to_string(max_sealed());
  for (;;) {
    auto reply =
        call({"EVAL", kPollScript, "2", value_name, lease_name, last}, nullptr, value_limits(2));
    if (!reply || reply->type != Reply::Type::kArray || reply->elements.empty()) {
      return std::nullopt;
    }
    long long state = reply->elements[0].integer;
    if (state == 1 && reply->elements.size() == 2) {
      return accept_value(key, std::move(reply->elements[1].str));
    }
    if (state != 0) {
      ++m_counters.lease_expired;  // the holder released or died without a value
      return std::nullopt;
    }
    auto now = std::chrono::steady_clock::now();
    if (now + m_options.poll_interval > deadline) return std::nullopt;
    std::this_thread::sleep_for(m_options.poll_interval);
  }
}

void TierImpl::renewal_loop() {
  MutexLock lock(&m_lease_mutex);
  auto period = std::max(m_options.lease_ttl / 3, std::chrono::milliseconds(1));
  while (!m_lease_stopping) {
    auto deadline = std::chrono::steady_clock::now() + period;
    while (!m_lease_stopping && m_lease_cv.wait_until(deadline)) {
    }
    if (m_lease_stopping || m_held.empty()) continue;
    lock.unlock();
    renew_held();
    lock.lock();
  }
}

void TierImpl::renew_held() {
  std::vector<Digest> keys;
  {
    MutexLock lock(&m_lease_mutex);
    keys.assign(m_held.begin(), m_held.end());
  }
  std::string ttl = std::to_string(m_options.lease_ttl.count());
  for (const Digest& key : keys) {
    std::string name = lease_key(key);
    auto reply = call({"EVAL", kRenewScript, "1", name, m_token, ttl}, &m_renewal_conn);
    // A transport error keeps the key: the next tick retries, and if Redis
    // stays away the lease simply expires there.
    if (!reply || reply->integer != 0) continue;
    MutexLock lock(&m_lease_mutex);
    if (m_held.erase(key) != 0) ++m_counters.lease_lost;  // not counted after our own release
  }
}

}  // namespace ccpool::remote
