#include "service/store_kv.h"

#include <spdlog/spdlog.h>

namespace ccpool::service {
namespace {

bool live(const cache::Entry& entry) {
  return entry.kind == cache::EntryKind::kBlob &&
         (entry.expires_ms == 0 || entry.expires_ms > resp::unix_now_ms());
}

}  // namespace

Digest StoreKv::store_key(std::string_view redis_key) {
  Hasher hasher;
  hasher.add_field("resp");
  hasher.add_field(redis_key);
  return hasher.digest();
}

// DEL stores this expiry (already past): the key reads as missing here and,
// once the write-back lands, on every node.
constexpr int64_t kDeletedExpiry = 1;

// A value in the node store is served without more ado; only a key the node
// store does not have is looked up in the tier, and then not when the node
// store holds its DEL tombstone: a local DEL wins over the tier, which may
// still hold the old value until the tombstone reaches Redis. One store read
// answers both (it keeps expired entries, the tombstone among them), so a GET
// reads the node store once.
std::optional<cache::Entry> StoreKv::load(const Digest& key, bool with_bodies) {
  Bodies bodies = with_bodies ? Bodies::kWith : Bodies::kWithout;
  Touch touch = with_bodies ? Touch::kCount : Touch::kPeek;
  std::optional<Found> found = m_storage.get_local(key, bodies, touch, cache::Expired::kKeep);
  bool tombstone = found && found->entry.expires_ms == kDeletedExpiry;
  // A counted read treats a value that merely expired as absent (the tier may
  // hold a newer one); a peek never asked the tier about a key it found.
  if (found && !tombstone && touch == Touch::kCount && !live(found->entry)) found.reset();
  if (!found && m_storage.has_tier()) {
    found = m_storage.get_remote(key, bodies, touch);
    if (found) ++m_remote_hits;
  }
  if (!found || !live(found->entry)) return std::nullopt;
  return std::move(found->entry);
}

bool StoreKv::save(const Digest& key, const cache::Entry& entry) {
  if (auto put = m_storage.put(key, entry); !put) {
    spdlog::warn("redis front: cannot store '{}': {}", entry.label, put.error().message);
    return false;
  }
  return true;
}

std::optional<std::string> StoreKv::get(std::string_view key) {
  auto entry = load(store_key(key), true);
  if (!entry || entry->outputs.empty()) return std::nullopt;
  return std::move(entry->outputs.front().data);
}

cache::Entry StoreKv::blob(std::string_view key, std::string_view value, int64_t expires_at_ms) {
  cache::Entry entry;
  entry.kind = cache::EntryKind::kBlob;
  entry.label = std::string(key);
  entry.tool = "redis";
  entry.expires_ms = expires_at_ms;
  entry.outputs.push_back(cache::Output{"value", 0644, 0, {}, std::string(value)});
  return entry;
}

bool StoreKv::set(std::string_view key, std::string_view value, int64_t expires_at_ms) {
  return save(store_key(key), blob(key, value, expires_at_ms));
}

void StoreKv::set_async(std::string_view key, std::string_view value, int64_t expires_at_ms,
                        SetDone done) {
  m_storage.put_async(
      store_key(key), blob(key, value, expires_at_ms),
      [label = std::string(key), done = std::move(done)](const Result<void>& stored) {
        if (!stored)
          spdlog::warn("redis front: cannot store '{}': {}", label, stored.error().message);
        done(stored.has_value());
      });
}

bool StoreKv::del(std::string_view key) {
  Digest digest = store_key(key);
  bool existed = load(digest, false).has_value();
  if (!m_storage.has_tier()) {
    (void)m_storage.local().remove(digest);
    return existed;
  }
  cache::Entry tombstone;
  tombstone.kind = cache::EntryKind::kBlob;
  tombstone.label = std::string(key);
  tombstone.tool = "redis";
  tombstone.expires_ms = kDeletedExpiry;  // expired: reads as missing everywhere, gc removes it
  (void)save(digest, tombstone);
  return existed;
}

bool StoreKv::exists(std::string_view key) {
  return load(store_key(key), false).has_value();
}

bool StoreKv::expire(std::string_view key, int64_t expires_at_ms) {
  Digest digest = store_key(key);
  auto entry = m_storage.local().peek(digest, true);
  if (!entry || !*entry || !live(**entry)) return false;
  (*entry)->expires_ms = expires_at_ms;
  return save(digest, **entry);
}

int64_t StoreKv::expires_at(std::string_view key) {
  auto entry = load(store_key(key), false);
  if (!entry) return -2;
  return entry->expires_ms == 0 ? -1 : entry->expires_ms;
}

}  // namespace ccpool::service
