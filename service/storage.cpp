#include "service/storage.h"

#include <spdlog/spdlog.h>

#include <chrono>

namespace ccpool::service {

Storage::Storage(cache::Store& local, remote::Tier* tier, cache::GroupCommitOptions commit)
    : m_local(local),
      m_tier(tier),
      m_commit(std::make_unique<cache::GroupCommitter>(local, commit)) {}

Storage::Storage(cache::Store& local, remote::Tier* tier, cache::GroupCommitter::BatchWriter writer)
    : m_local(local),
      m_tier(tier),
      m_commit(std::make_unique<cache::GroupCommitter>(local, std::move(writer),
                                                       cache::GroupCommitOptions{})) {}

std::optional<cache::Entry> Storage::read_local(const Digest& key, Bodies bodies, Touch touch,
                                                cache::Expired expired) {
  Result<std::optional<cache::Entry>> entry = touch == Touch::kCount
                                                  ? m_local.get(key, expired)
                                                  : m_local.peek(key, bodies == Bodies::kWith);
  if (!entry) {
    spdlog::warn("cannot read {} from the store: {}", key.hex(), entry.error().message);
    return std::nullopt;
  }
  return std::move(*entry);
}

std::optional<Found> Storage::get(const Digest& key, Bodies bodies, Touch touch) {
  if (auto local = get_local(key, bodies, touch)) return local;
  return get_remote(key, bodies, touch);
}

std::optional<Found> Storage::get_local(const Digest& key, Bodies bodies, Touch touch,
                                        cache::Expired expired) {
  auto started = std::chrono::steady_clock::now();
  std::optional<cache::Entry> local = read_local(key, bodies, touch, expired);
  m_local_latency.observe_since(started);
  if (local) return Found{std::move(*local), Source::kLocal};
  return std::nullopt;
}

std::optional<Found> Storage::get_remote(const Digest& key, Bodies bodies, Touch touch) {
  if (m_tier == nullptr) return std::nullopt;
  auto started = std::chrono::steady_clock::now();
  std::optional<std::string> packed = m_tier->get(key);
  m_tier_latency.observe_since(started);
  if (!packed || !adopt_packed(key, *packed)) return std::nullopt;
  if (std::optional<cache::Entry> entry = read_local(key, bodies, touch)) {
    return Found{std::move(*entry), Source::kRemote};
  }
  return std::nullopt;
}

bool Storage::adopt_packed(const Digest& key, std::string_view packed) {
  if (auto put = m_local.put_packed(key, packed); !put) {
    spdlog::warn("cannot store {} fetched from the cluster tier: {}", key.hex(),
                 put.error().message);
    return false;
  }
  return true;
}

Result<void> Storage::put(const Digest& key, const cache::Entry& entry) {
  CCPOOL_TRY(m_commit->put(key, entry));
  write_behind(key);
  return ok();
}

std::vector<Result<void>> Storage::put_all(const std::vector<cache::GroupCommitter::PutRef>& puts) {
  std::vector<Result<void>> results = m_commit->put_all(puts);
  // In order, up to the first that failed: the tier never holds a put whose
  // predecessor (the result a manifest names) it lacks.
  for (size_t i = 0; i < puts.size() && results[i]; ++i) write_behind(puts[i].key);
  return results;
}

void Storage::put_async(const Digest& key, const cache::Entry& entry, PutDone done) {
  m_commit->submit(key, entry, [this, key, done = std::move(done)](const Result<void>& r) {
    if (done) done(r);  // the reply does not wait for the tier
    if (r) write_behind(key);
  });
}

void Storage::write_behind(const Digest& key) {
  if (m_tier == nullptr) return;
  if (auto packed = m_local.get_packed(key); packed && *packed)
    m_tier->put_async(key, std::move(**packed));
}

}  // namespace ccpool::service
