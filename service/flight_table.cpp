#include "service/flight_table.h"

#include <algorithm>

namespace ccpool::service {

Mutex g_flight_mutex;

FlightTable::JoinResult FlightTable::join_or_lead(std::shared_ptr<Flight> candidate, bool shareable,
                                                  Waiter waiter) {
  MutexLock lock(&g_flight_mutex);
  if (shareable) {
    auto it = m_by_key.find(candidate->key);
    if (it != m_by_key.end() && !it->second->cancelled) {
      waiter.leader = false;
      it->second->waiters.push_back(std::move(waiter));
      return {it->second, false};
    }
  }
  candidate->id = m_next_id++;
  candidate->shared = shareable;
  waiter.leader = true;
  candidate->waiters.push_back(std::move(waiter));
  if (shareable) m_by_key[candidate->key] = candidate;
  m_by_id[candidate->id] = candidate;
  return {std::move(candidate), true};
}

std::vector<std::shared_ptr<Flight>> FlightTable::remove_connection(uint64_t conn_id) {
  MutexLock lock(&g_flight_mutex);
  std::vector<std::shared_ptr<Flight>> orphaned;
  for (auto& [id, flight] : m_by_id) {
    auto& w = flight->waiters;
    size_t before = w.size();
    w.erase(
        std::remove_if(w.begin(), w.end(), [&](const Waiter& x) { return x.conn_id == conn_id; }),
        w.end());
    if (before != w.size() && w.empty() && flight->state != Flight::State::kDone) {
      flight->cancelled = true;
      orphaned.push_back(flight);
    }
  }
  for (auto& flight : orphaned) {
    auto it = m_by_key.find(flight->key);
    if (it != m_by_key.end() && it->second == flight) m_by_key.erase(it);
  }
  return orphaned;
}

std::vector<Waiter> FlightTable::complete(const std::shared_ptr<Flight>& flight) {
  MutexLock lock(&g_flight_mutex);
  flight->state = Flight::State::kDone;
  auto it = m_by_key.find(flight->key);
  if (it != m_by_key.end() && it->second == flight) m_by_key.erase(it);
  m_by_id.erase(flight->id);
  return std::move(flight->waiters);
}

bool FlightTable::set_job(const std::shared_ptr<Flight>& flight, pool::JobId job) {
  MutexLock lock(&g_flight_mutex);
  flight->job = job;
  return !flight->cancelled;
}

bool FlightTable::set_running(const std::shared_ptr<Flight>& flight, pid_t pid) {
  MutexLock lock(&g_flight_mutex);
  flight->pid = pid;
  flight->state = Flight::State::kRunning;
  return !flight->cancelled;
}

bool FlightTable::is_cancelled(const std::shared_ptr<Flight>& flight) {
  MutexLock lock(&g_flight_mutex);
  return flight->cancelled;
}

std::vector<std::shared_ptr<Flight>> FlightTable::all() {
  MutexLock lock(&g_flight_mutex);
  std::vector<std::shared_ptr<Flight>> out;
  out.reserve(m_by_id.size());
  for (auto& [id, flight] : m_by_id) out.push_back(flight);
  return out;
}

pid_t FlightTable::leader_client_pid(uint64_t flight_id) {
  MutexLock lock(&g_flight_mutex);
  auto it = m_by_id.find(flight_id);
  if (it == m_by_id.end() || it->second->waiters.empty()) return 0;
  return it->second->waiters.front().client_pid;
}

size_t FlightTable::size() {
  MutexLock lock(&g_flight_mutex);
  return m_by_id.size();
}

}  // namespace ccpool::service
