// Internals of remote::Tier. Threads:
//  - callers: get / acquire_lease / wait_for_result use pooled connections;
//  - one writer thread owns its connection and drains the write queue (puts
//    and lease releases, in FIFO order);
//  - one renewal thread owns its connection and extends held leases every
//    lease_ttl / 3.
// All Redis traffic goes through call(), which applies the circuit breaker
// and counts errors.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/thread_annotations.h"
#include "remote/breaker.h"
#include "remote/connection.h"
#include "remote/endpoint.h"
#include "remote/tier.h"

namespace ccpool::remote {

struct Secrets {
  std::string password;  // empty: no AUTH
  std::string hmac_key;  // empty: unsigned
};

class TierImpl {
 public:
  TierImpl(RemoteOptions options, Endpoint endpoint, Secrets secrets, std::string token);
  ~TierImpl();
  TierImpl(const TierImpl&) = delete;
  TierImpl& operator=(const TierImpl&) = delete;

  std::optional<std::string> get(const Digest& key);
  void put_async(const Digest& key, std::string value);
  LeaseState acquire_lease(const Digest& key);
  void release_lease(const Digest& key);
  std::optional<std::string> wait_for_result(const Digest& key, std::chrono::milliseconds max_wait);
  RemoteCounters counters() const;
  void flush_for_testing();

  std::chrono::milliseconds lease_wait_max() const { return m_options.lease_wait_max; }
  std::string value_key(const Digest& key) const {
    return m_options.key_prefix + "obj:" + key.hex();
  }
  std::string lease_key(const Digest& key) const {
    return m_options.key_prefix + "lease:" + key.hex();
  }
  const std::string& token() const { return m_token; }

 private:
  struct WriteOp {
    bool release = false;  // false: SET value; true: compare-and-delete the lease
    Digest key;
    std::string value;
  };

  // One command through the breaker. `own` is a thread's dedicated
  // connection (opened on demand, reset on failure); nullptr uses the pool.
  // Transport failures, replies outside `limits` and error replies are
  // counted and returned as errors.
  Result<Reply> call(const std::vector<std::string_view>& args, std::unique_ptr<Connection>* own,
                     const ReplyLimits& limits = ReplyLimits::small());
  Result<std::unique_ptr<Connection>> take_pooled();
  void give_back(std::unique_ptr<Connection> conn);

  // The largest value read back from Redis: max_value plus the envelope.
  uint64_t max_sealed() const;
  // What a value read may return: GETRANGE's one byte more than max_sealed(),
  // alone or (the lease poll) in an array of at most two elements.
  ReplyLimits value_limits(size_t elements) const {
    return ReplyLimits::value(max_sealed() + 1, elements);
  }
  // Unwraps, verifies and validates a value read from Redis; counts the outcome.
  std::optional<std::string> accept_value(const Digest& key, std::string sealed);

  void writer_loop();
  void write_one(WriteOp& op, std::unique_ptr<Connection>& conn);
  void renewal_loop();
  void renew_held();
  bool is_held(const Digest& key) const;

  const RemoteOptions m_options;
  const Endpoint m_endpoint;
  const Secrets m_secrets;
  const std::string m_token;
  CircuitBreaker m_breaker;

  Mutex m_pool_mutex;
  std::vector<std::unique_ptr<Connection>> m_idle GUARDED_BY(m_pool_mutex);

  mutable Mutex m_queue_mutex;
  CondVar m_queue_cv{&m_queue_mutex};    // writer waits for work
  CondVar m_drained_cv{&m_queue_mutex};  // flush_for_testing waits for empty
  std::deque<WriteOp> m_queue GUARDED_BY(m_queue_mutex);
  uint64_t m_queue_bytes GUARDED_BY(m_queue_mutex) = 0;
  bool m_writing GUARDED_BY(m_queue_mutex) = false;
  bool m_stopping GUARDED_BY(m_queue_mutex) = false;
  std::chrono::steady_clock::time_point m_drain_deadline GUARDED_BY(m_queue_mutex){};

  mutable Mutex m_lease_mutex;
  CondVar m_lease_cv{&m_lease_mutex};  // renewal thread sleeps on it
  std::set<Digest> m_held GUARDED_BY(m_lease_mutex);
  bool m_lease_stopping GUARDED_BY(m_lease_mutex) = false;
  std::unique_ptr<Connection> m_renewal_conn;  // used only by the renewal thread

  struct Counters {
    std::atomic<uint64_t> hits{0}, misses{0}, errors{0}, writes{0}, skipped{0}, invalid{0},
        bad_signature{0}, lease_acquired{0}, lease_waits{0}, lease_expired{0}, breaker_rejected{0},
        dropped{0}, lease_lost{0}, lease_untimed{0};
  } m_counters;

  std::thread m_writer;  // started last in the constructor
  std::thread m_renewer;
};

}  // namespace ccpool::remote
