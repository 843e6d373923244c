// Write-transaction machinery: map growth/eviction on MDB_MAP_FULL, and the
// building blocks that keep records, usage, lru, bodies, refs and the
// counters consistent with each other inside one transaction.
#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "cache/store_impl.h"

namespace ccpool::cache {

using lmdb::Table;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string_view key_view(const Digest& d) {
  return {reinterpret_cast<const char*>(d.bytes.data()), d.bytes.size()};
}

Digest digest_of(std::string_view bytes) {
  Digest d;
  if (bytes.size() == 16) std::memcpy(d.bytes.data(), bytes.data(), 16);
  return d;
}

uint64_t PreparedEntry::stored_size() const {
  uint64_t total = record.size();
  for (const auto& [digest, stored] : bodies) total += stored.size();
  return total;
}

Error Store::Impl::lmdb_error(int rc, const std::string& doing) const {
  if (rc == ENOSPC) {
    return Error(ErrorCode::kFull,
                 "disk full while writing the store in '" + dir +
                     "': free space, or set CCPOOL_DIR (or --dir) to a disk with room");
  }
  if (rc == EACCES || rc == EPERM || rc == EROFS) {
    return Error(ErrorCode::kPermission, "no permission to use the store in '" + dir + "' (" +
                                             lmdb::rc_text(rc) +
                                             "); use a directory you own via --dir or CCPOOL_DIR");
  }
  if (rc == lmdb::kMapFull) {
    return Error(ErrorCode::kFull, "the store in '" + dir + "' is full (map at its cap of " +
                                       std::to_string(map_cap >> 20) +
                                       " MiB); run 'ccpool cache gc'");
  }
  if (lmdb::is_corruption(rc)) {
    return Error(ErrorCode::kCorruption, "the store in '" + dir + "' is corrupt (" +
                                             lmdb::rc_text(rc) + "); remove it with 'rm -rf " +
                                             dir + "' (it refills) or choose another --dir");
  }
  return Error(ErrorCode::kIo, doing + " in '" + dir + "' failed: " + lmdb::rc_text(rc));
}

void Store::Impl::adopt_map_size() {
  WriterMutexLock lock(&env_mutex);
  env->set_map_size(0);
}

Result<void> Store::Impl::on_map_full(uint64_t need) {
  uint64_t current = env->info().map_size;
  if (current < map_cap) {
    uint64_t grown = std::min(map_cap, std::max(current * 2, current + need * 2));
    WriterMutexLock lock(&env_mutex);
    int rc = env->set_map_size(grown);
    if (rc != 0) return tl::unexpected(lmdb_error(rc, "growing the map"));
    spdlog::debug("cache: map grown to {} bytes", grown);
    return ok();
  }
  // At the cap: evict the least recently used eighth (at least `need` bytes).
  std::unique_ptr<lmdb::Txn> txn;
  ReaderMutexLock lock(&env_mutex);
  int rc = lmdb::Txn::begin(*env, true, txn);
  std::string_view raw;
  Counters c;
  if (rc == 0 && txn->get(Table::kMeta, "counters", raw) == 0) c = decode_counters(raw);
  uint64_t target = c.stored_bytes > need ? c.stored_bytes - std::max(need, c.stored_bytes / 8) : 0;
  if (rc == 0) rc = evict_to(*txn, c, target, {});
  if (rc == 0) rc = txn->put(Table::kMeta, "counters", encode_counters(c));
  if (rc == 0) rc = txn->commit();
  if (rc != 0) return tl::unexpected(lmdb_error(rc, "evicting at the map cap"));
  return ok();
}

Result<void> Store::Impl::run_write(const WriteBody& body) {
  std::unordered_map<Digest, Usage> taken;
  Counters deltas;
  std::map<std::string, uint64_t> events;
  {
    MutexLock lock(&touch_mutex);
    taken.swap(touches);
    std::swap(deltas, pending);
    events.swap(pending_events);
  }
  MutexLock writer(&write_mutex);
  int rc = 0;
  for (int attempt = 0; attempt < 12; ++attempt) {
    ReaderMutexLock lock(&env_mutex);
    std::unique_ptr<lmdb::Txn> txn;
    rc = lmdb::Txn::begin(*env, true, txn);
    if (rc == lmdb::kMapResized) {
      lock.unlock();
      adopt_map_size();
      continue;
    }
    if (rc != 0) break;
    std::string_view raw;
    Counters c;
    if (txn->get(Table::kMeta, "counters", raw) == 0) c = decode_counters(raw);
    c.hits += deltas.hits;
    c.misses += deltas.misses;
    c.time_saved_ms += deltas.time_saved_ms;
    std::optional<Error> error;
    rc = apply_touches(*txn, taken, c);
    if (rc == 0) rc = body(*txn, c, error);
    if (error) return tl::unexpected(std::move(*error));
    if (rc == 0) rc = txn->put(Table::kMeta, "counters", encode_counters(c));
    if (rc == 0 && !events.empty()) {
      std::map<std::string, uint64_t> total;
      if (txn->get(Table::kMeta, "events", raw) == 0) total = decode_events(raw);
      merge_events(total, events);
      rc = txn->put(Table::kMeta, "events", encode_events(total));
    }
    if (rc == 0) rc = txn->commit();
    if (rc == 0) return ok();
    txn.reset();
    lock.unlock();
    if (rc != lmdb::kMapFull) break;
    CCPOOL_TRY(on_map_full(1u << 20));
  }
  return tl::unexpected(lmdb_error(rc, "writing"));
}

namespace {

// Deletes `key` if present. Any other failure is returned: LMDB leaves the
// transaction unusable after it (lmdb::Txn keeps the cause).
int del_if_present(lmdb::Txn& txn, Table t, std::string_view key) {
  int rc = txn.del(t, key);
  return rc == lmdb::kNotFound ? 0 : rc;
}

}  // namespace

int Store::Impl::apply_touches(lmdb::Txn& txn, const std::unordered_map<Digest, Usage>& t,
                               Counters& c) {
  for (const auto& [key, use] : t) {
    std::string_view raw;
    if (txn.get(Table::kUsage, key_view(key), raw) != 0) continue;  // removed meanwhile
    Usage old = decode_usage(raw);
    Usage now{std::max(old.last_used_ms, use.last_used_ms), old.hits + use.hits};
    int rc = del_if_present(txn, Table::kLru, lru_key(old.last_used_ms, key));
    if (rc == 0) rc = txn.put(Table::kUsage, key_view(key), encode_usage(now));
    if (rc == 0) rc = txn.put(Table::kLru, lru_key(now.last_used_ms, key), "");
    if (rc != 0) return rc;
  }
  return 0;
}

int Store::Impl::insert_entry(lmdb::Txn& txn, const PreparedEntry& e, Counters& c) {
  for (const auto& [digest, stored] : e.bodies) {
    std::string_view raw;
    uint64_t refs = 0;
    if (txn.get(Table::kRefs, key_view(digest), raw) == 0 && raw.size() == 8)
      std::memcpy(&refs, raw.data(), 8);
    int rc = 0;
    if (refs == 0) {
      rc = txn.put(Table::kBodies, key_view(digest), stored);
      c.stored_bytes += stored.size();
      c.bodies += 1;
    }
    ++refs;
    if (rc == 0)
      rc = txn.put(Table::kRefs, key_view(digest),
                   std::string_view(reinterpret_cast<char*>(&refs), 8));
    if (rc != 0) return rc;
  }
  int rc = txn.put(Table::kRecords, key_view(e.key), e.record);
  if (rc == 0) rc = txn.put(Table::kUsage, key_view(e.key), encode_usage(e.usage));
  if (rc == 0) rc = txn.put(Table::kLru, lru_key(e.usage.last_used_ms, e.key), "");
  c.entries += 1;
  c.logical_bytes += e.logical_bytes;
  c.stored_bytes += e.record.size();
  return rc;
}

int Store::Impl::remove_entry(lmdb::Txn& txn, const Digest& key, Counters& c, bool* found) {
  std::string_view raw;
  int rc = txn.get(Table::kRecords, key_view(key), raw);
  if (found) *found = rc == 0;
  if (rc == lmdb::kNotFound) return 0;
  if (rc != 0) return rc;
  uint64_t record_size = raw.size();
  auto record = decode_record(raw);  // a corrupt record leaks its bodies; verify --fix sweeps them
  if (record) {
    for (const BodyRef& body : record->bodies()) {
      std::string_view refs_raw;
      uint64_t refs = 0;
      if (txn.get(Table::kRefs, key_view(body.digest), refs_raw) == 0 && refs_raw.size() == 8) {
        std::memcpy(&refs, refs_raw.data(), 8);
      }
      if (refs > 1) {
        --refs;
        rc = txn.put(Table::kRefs, key_view(body.digest),
                     std::string_view(reinterpret_cast<char*>(&refs), 8));
      } else {
        std::string_view stored;
        if (txn.get(Table::kBodies, key_view(body.digest), stored) == 0) {
          c.stored_bytes -= std::min<uint64_t>(c.stored_bytes, stored.size());
          c.bodies -= std::min<uint64_t>(c.bodies, 1);
          rc = del_if_present(txn, Table::kBodies, key_view(body.digest));
        }
        if (rc == 0) rc = del_if_present(txn, Table::kRefs, key_view(body.digest));
      }
      if (rc != 0) return rc;
    }
    c.logical_bytes -= std::min(c.logical_bytes, record->logical_bytes());
  }
  if (txn.get(Table::kUsage, key_view(key), raw) == 0) {
    rc = del_if_present(txn, Table::kLru, lru_key(decode_usage(raw).last_used_ms, key));
    if (rc == 0) rc = del_if_present(txn, Table::kUsage, key_view(key));
    if (rc != 0) return rc;
  }
  rc = txn.del(Table::kRecords, key_view(key));
  c.entries -= std::min<uint64_t>(c.entries, 1);
  c.stored_bytes -= std::min(c.stored_bytes, record_size);
  return rc;
}

int Store::Impl::evict_to(lmdb::Txn& txn, Counters& c, uint64_t limit,
                          const std::unordered_set<Digest>& protect) {
  while (c.stored_bytes > limit) {
    std::optional<Digest> victim;
    int rc = txn.scan(Table::kLru, "", [&](std::string_view k, std::string_view) {
      Digest d = entry_of_lru_key(k);
      if (protect.count(d)) return true;
      victim = d;
      return false;
    });
    if (rc != 0) return rc;
    if (!victim) break;
    if ((rc = remove_entry(txn, *victim, c)) != 0) return rc;
    c.evictions += 1;
  }
  return 0;
}

}  // namespace ccpool::cache
