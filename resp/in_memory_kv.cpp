// InMemoryKv: the KvBackend used by tests, the benchmark and the fuzzer. One
// mutex around one hash map; expired entries are erased when touched.
#include <time.h>

#include "resp/front.h"

namespace ccpool::resp {

int64_t unix_now_ms() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}

InMemoryKv::InMemoryKv(Clock now_ms) : m_now(now_ms ? std::move(now_ms) : Clock(unix_now_ms)) {}

InMemoryKv::Entry* InMemoryKv::find_live(std::string_view key) {
  auto it = m_entries.find(std::string(key));
  if (it == m_entries.end()) return nullptr;
  if (it->second.expires_at_ms != 0 && it->second.expires_at_ms <= m_now()) {
    m_entries.erase(it);
    return nullptr;
  }
  return &it->second;
}

std::optional<std::string> InMemoryKv::get(std::string_view key) {
  MutexLock lock(&m_mutex);
  Entry* entry = find_live(key);
  if (!entry) return std::nullopt;
  return entry->value;
}

bool InMemoryKv::set(std::string_view key, std::string_view value, int64_t expires_at_ms) {
  MutexLock lock(&m_mutex);
  Entry& entry = m_entries[std::string(key)];
  entry.value.assign(value);
  entry.expires_at_ms = expires_at_ms;
  return true;
}

bool InMemoryKv::del(std::string_view key) {
  MutexLock lock(&m_mutex);
  if (!find_live(key)) return false;
  m_entries.erase(std::string(key));
  return true;
}

bool InMemoryKv::exists(std::string_view key) {
  MutexLock lock(&m_mutex);
  return find_live(key) != nullptr;
}

bool InMemoryKv::expire(std::string_view key, int64_t expires_at_ms) {
  MutexLock lock(&m_mutex);
  Entry* entry = find_live(key);
  if (!entry) return false;
  entry->expires_at_ms = expires_at_ms;
  return true;
}

int64_t InMemoryKv::expires_at(std::string_view key) {
  MutexLock lock(&m_mutex);
  Entry* entry = find_live(key);
  if (!entry) return -2;
  return entry->expires_at_ms == 0 ? -1 : entry->expires_at_ms;
}

size_t InMemoryKv::size() {
  MutexLock lock(&m_mutex);
  int64_t now = m_now();
  size_t live = 0;
  for (const auto& [key, entry] : m_entries) {
    if (entry.expires_at_ms == 0 || entry.expires_at_ms > now) ++live;
  }
  return live;
}

}  // namespace ccpool::resp
