// The write-back thread: puts and lease releases leave the caller's path and
// run here, one at a time, in the order they were queued.
#include "remote/envelope.h"
#include "remote/tier_impl.h"

namespace ccpool::remote {
namespace {

// Deletes the lease only if it still holds our token: after an expiry another
// node may own it, and a plain DEL would free that node's lease.
constexpr const char* kReleaseScript =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) "
    "else return 0 end";

}  // namespace

void TierImpl::put_async(const Digest& key, std::string value) {
  if (value.size() > m_options.max_value) {
    ++m_counters.skipped;
    return;
  }
  {
    MutexLock lock(&m_queue_mutex);
    if (m_stopping || m_queue.size() >= m_options.write_queue_entries ||
        m_queue_bytes + value.size() > m_options.write_queue_bytes) {
      ++m_counters.dropped;
      return;
    }
    m_queue_bytes += value.size();
    m_queue.push_back(WriteOp{false, key, std::move(value)});
  }
  m_queue_cv.signal();
}

void TierImpl::release_lease(const Digest& key) {
  {
    MutexLock lock(&m_lease_mutex);
    if (m_held.erase(key) == 0) return;  // never held, or already lost
  }
  // Releases are tiny and bypass the queue bounds: dropping one would make
  // waiters sit out the whole lease_ttl.
  {
    MutexLock lock(&m_queue_mutex);
    if (!m_stopping) m_queue.push_back(WriteOp{true, key, {}});
  }
  m_queue_cv.signal();
}

void TierImpl::flush_for_testing() {
  MutexLock lock(&m_queue_mutex);
  while (!m_queue.empty() || m_writing) m_drained_cv.wait();
}

void TierImpl::writer_loop() {
  std::unique_ptr<Connection> conn;
  MutexLock lock(&m_queue_mutex);
  for (;;) {
    while (!m_stopping && m_queue.empty()) m_queue_cv.wait();
    if (m_queue.empty()) break;  // stopping and drained
    if (m_stopping && std::chrono::steady_clock::now() >= m_drain_deadline) {
      for (const WriteOp& op : m_queue) m_counters.dropped += op.release ? 0 : 1;
      m_queue.clear();
      m_queue_bytes = 0;
      break;
    }
    WriteOp op = std::move(m_queue.front());
    m_queue.pop_front();
    m_queue_bytes -= op.value.size();
    m_writing = true;
    lock.unlock();
    write_one(op, conn);
    lock.lock();
    m_writing = false;
    if (m_queue.empty()) m_drained_cv.signal_all();
  }
  m_drained_cv.signal_all();
}

void TierImpl::write_one(WriteOp& op, std::unique_ptr<Connection>& conn) {
  if (op.release) {
    std::string name = lease_key(op.key);
    (void)call({"EVAL", kReleaseScript, "1", name, m_token}, &conn);
    return;
  }
  std::string sealed = seal(op.key, op.value, m_secrets.hmac_key);
  std::string().swap(op.value);
  if (sealed.empty()) {
    ++m_counters.errors;  // OpenSSL could not compute the MAC
    return;
  }
  std::string name = value_key(op.key);
  std::string ttl = std::to_string(m_options.ttl.count());
  auto reply = m_options.ttl.count() > 0 ? call({"SET", name, sealed, "EX", ttl}, &conn)
                                         : call({"SET", name, sealed}, &conn);
  if (reply) ++m_counters.writes;
}

}  // namespace ccpool::remote
