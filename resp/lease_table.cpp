// See lease_table.h.
#include "resp/lease_table.h"

#include <pthread.h>

namespace ccpool::resp {

LeaseTable::LeaseTable() : m_deadline_thread([this] { expire_loop(); }) {}

LeaseTable::~LeaseTable() {
  Ended ended;
  {
    MutexLock lock(&m_mutex);
    m_stopping = true;
    for (auto it = m_leases.begin(); it != m_leases.end();) {
      auto next = std::next(it);
      end_lease_locked(it, ended, false);
      it = next;
    }
    m_deadline_changed.signal_all();
  }
  m_deadline_thread.join();
  run_waiters(ended);
}

LeaseTable::Outcome LeaseTable::acquire(const std::string& key, uint64_t owner,
                                        Clock::time_point deadline, Waiter waiter) {
  MutexLock lock(&m_mutex);
  auto it = m_leases.find(key);
  if (it == m_leases.end() || it->second.owner == owner) {
    if (it == m_leases.end()) m_leases.emplace(key, Lease{owner, {}});
    ++m_stats.leads;
    return Outcome::kLead;
  }
  uint64_t id = m_next_wait++;
  bool earliest = m_deadlines.empty() || deadline < m_deadlines.begin()->first;
  it->second.waits.push_back(Wait{id, deadline, std::move(waiter)});
  m_deadlines.emplace(deadline, std::make_pair(key, id));
  ++m_stats.waits;
  if (earliest) m_deadline_changed.signal();
  return Outcome::kWait;
}

void LeaseTable::stored(std::string_view key,
                        const std::function<std::optional<std::string>()>& value) {
  Ended ended;
  {
    MutexLock lock(&m_mutex);
    auto it = m_leases.find(std::string(key));
    if (it == m_leases.end()) return;
    end_lease_locked(it, ended, true);
  }
  if (ended.empty()) return;
  std::optional<std::string> bytes = value();
  if (!bytes) {
    MutexLock lock(&m_mutex);
    m_stats.served -= ended.size();
    m_stats.abandoned += ended.size();
  }
  for (auto& [waiter, result] : ended) result = bytes;
  run_waiters(ended);
}

bool LeaseTable::release(std::string_view key, uint64_t owner) {
  Ended ended;
  {
    MutexLock lock(&m_mutex);
    auto it = m_leases.find(std::string(key));
    if (it == m_leases.end() || it->second.owner != owner) return false;
    end_lease_locked(it, ended, false);
  }
  run_waiters(ended);
  return true;
}

void LeaseTable::release_all(uint64_t owner) {
  Ended ended;
  {
    MutexLock lock(&m_mutex);
    for (auto it = m_leases.begin(); it != m_leases.end();) {
      auto next = std::next(it);
      if (it->second.owner == owner) end_lease_locked(it, ended, false);
      it = next;
    }
  }
  run_waiters(ended);
}

bool LeaseTable::held(std::string_view key) const {
  MutexLock lock(&m_mutex);
  return m_leases.count(std::string(key)) > 0;
}

LeaseStats LeaseTable::stats() const {
  MutexLock lock(&m_mutex);
  LeaseStats out = m_stats;
  out.keys_in_flight = m_leases.size();
  out.waiting = 0;
  for (const auto& [key, lease] : m_leases) out.waiting += lease.waits.size();
  return out;
}

// Ends the lease `it`: its waits move to `ended` (with nullopt; stored() fills
// in the value afterwards) and their deadlines are dropped.
void LeaseTable::end_lease_locked(std::unordered_map<std::string, Lease>::iterator it, Ended& ended,
                                  bool served) {
  for (Wait& wait : it->second.waits) {
    auto range = m_deadlines.equal_range(wait.deadline);
    for (auto d = range.first; d != range.second; ++d) {
      if (d->second.second == wait.id) {
        m_deadlines.erase(d);
        break;
      }
    }
    ended.emplace_back(std::move(wait.waiter), std::nullopt);
    ++(served ? m_stats.served : m_stats.abandoned);
  }
  m_leases.erase(it);
}

void LeaseTable::run_waiters(Ended& ended) {
  for (auto& [waiter, value] : ended) waiter(std::move(value));
}

// Ends waits whose deadline passed; the lease itself stays with its leader.
void LeaseTable::expire_loop() {
  pthread_setname_np(pthread_self(), "ccpool-leases");
  MutexLock lock(&m_mutex);
  while (!m_stopping) {
    if (m_deadlines.empty()) {
      m_deadline_changed.wait();
      continue;
    }
    Clock::time_point first = m_deadlines.begin()->first;
    if (Clock::now() < first) {
      m_deadline_changed.wait_until(first);
      continue;
    }
    auto [key, id] = m_deadlines.begin()->second;
    m_deadlines.erase(m_deadlines.begin());
    auto it = m_leases.find(key);
    if (it == m_leases.end()) continue;
    auto& waits = it->second.waits;
    for (auto w = waits.begin(); w != waits.end(); ++w) {
      if (w->id != id) continue;
      Waiter waiter = std::move(w->waiter);
      waits.erase(w);
      ++m_stats.timed_out;
      lock.unlock();
      waiter(std::nullopt);
      lock.lock();
      break;
    }
  }
}

}  // namespace ccpool::resp
