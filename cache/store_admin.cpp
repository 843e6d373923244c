// Inspection and maintenance for the `ccpool cache` CLI: stats, ls, prefix
// lookup, gc, verify, clear and the corruption test seam.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "cache/store_impl.h"

namespace ccpool::cache {
namespace {

using lmdb::Table;
constexpr size_t kRemoveBatch = 256;

int hex_nibble(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Removes `keys` in transactions of kRemoveBatch, reporting progress.
Result<uint64_t> remove_keys(Store::Impl& impl, const std::vector<Digest>& keys,
                             bool count_as_eviction, const ProgressFn& progress,
                             uint64_t* freed = nullptr) {
  uint64_t removed = 0;
  for (size_t i = 0; i < keys.size(); i += kRemoveBatch) {
    size_t end = std::min(keys.size(), i + kRemoveBatch);
    CCPOOL_TRY(impl.run_write([&](lmdb::Txn& txn, Counters& c, std::optional<Error>&) {
      uint64_t before = c.stored_bytes;
      for (size_t j = i; j < end; ++j) {
        bool found = false;
        int rc = impl.remove_entry(txn, keys[j], c, &found);
        if (rc != 0) return rc;
        removed += found;
        if (found && count_as_eviction) c.evictions += 1;
      }
      if (freed) *freed += before - c.stored_bytes;
      return 0;
    }));
    if (progress) progress(end, keys.size());
  }
  return removed;
}

}  // namespace

Result<StoreStats> Store::stats() {
  flush();
  return m_impl->run_read<StoreStats>([&](lmdb::Txn& txn) -> Result<StoreStats> {
    StoreStats s;
    std::string_view raw;
    Counters c;
    if (txn.get(Table::kMeta, "counters", raw) == 0) c = decode_counters(raw);
    s.entries = txn.count(Table::kRecords);
    s.bodies = txn.count(Table::kBodies);
    s.logical_bytes = c.logical_bytes;
    s.stored_bytes = c.stored_bytes;
    s.hits = c.hits;
    s.misses = c.misses;
    s.time_saved_ms = c.time_saved_ms;
    s.evictions = c.evictions;
    s.corrupt_evictions = c.corrupt_evictions;
    if (txn.get(Table::kMeta, "events", raw) == 0) s.events = decode_events(raw);
    int rc = txn.scan(Table::kRecords, "", [&](std::string_view, std::string_view value) {
      int64_t created = 0;
      if (value.size() >= 10)
        std::memcpy(&created, value.data() + 2, 8);  // version, kind, created_ms
      if (s.oldest_ms == 0 || created < s.oldest_ms) s.oldest_ms = created;
      s.newest_ms = std::max(s.newest_ms, created);
      return true;
    });
    if (rc != 0) return tl::unexpected(m_impl->lmdb_error(rc, "scanning"));
    lmdb::EnvInfo info = m_impl->env->info();
    s.map_size = info.map_size;
    s.map_used = info.map_used;
    s.max_size = m_impl->options.max_size;
    return s;
  });
}

Result<std::vector<EntrySummary>> Store::list(SortBy sort, size_t limit) {
  flush();
  auto all = m_impl->run_read<std::vector<EntrySummary>>(
      [&](lmdb::Txn& txn) -> Result<std::vector<EntrySummary>> {
        std::vector<EntrySummary> out;
        int rc = txn.scan(Table::kRecords, "", [&](std::string_view k, std::string_view v) {
          auto rec = decode_record(v);
          EntrySummary s;
          s.key = digest_of(k);
          if (rec) {
            s.kind = rec->kind;
            s.created_ms = rec->created_ms;
            s.expires_ms = rec->expires_ms;
            s.time_saved_ms = rec->time_saved_ms;
            s.logical_bytes = rec->logical_bytes();
            s.output_count = static_cast<uint32_t>(rec->outputs.size());
            s.tool = rec->tool;
            s.label = rec->label;
          } else {
            s.label = "(corrupt record)";
          }
          std::string_view raw;
          if (txn.get(Table::kUsage, k, raw) == 0) {
            Usage u = decode_usage(raw);
            s.last_used_ms = u.last_used_ms;
            s.hits = u.hits;
          }
          out.push_back(std::move(s));
          return true;
        });
        if (rc != 0) return tl::unexpected(m_impl->lmdb_error(rc, "scanning"));
        return out;
      });
  if (!all) return all;
  auto cmp = [sort](const EntrySummary& a, const EntrySummary& b) {
    switch (sort) {
      case SortBy::kSize:
        return a.logical_bytes > b.logical_bytes;
      case SortBy::kHits:
        return a.hits > b.hits;
      case SortBy::kUsed:
        break;
    }
    return a.last_used_ms > b.last_used_ms;  // most recently used first
  };
  std::stable_sort(all->begin(), all->end(), cmp);
  if (limit && all->size() > limit) all->resize(limit);
  return all;
}

Result<std::vector<Digest>> Store::find_prefix(std::string_view hex_prefix, size_t limit) {
  if (hex_prefix.empty() || hex_prefix.size() > 32 ||
      std::any_of(hex_prefix.begin(), hex_prefix.end(), [](char c) { return hex_nibble(c) < 0; })) {
    return make_error(ErrorCode::kInvalidArgument,
                      "malformed key '" + std::string(hex_prefix) +
                          "': use 1 to 32 hex digits (see 'ccpool cache ls')");
  }
  std::string start((hex_prefix.size() + 1) / 2, '\0');
  for (size_t i = 0; i < hex_prefix.size(); ++i) {
    start[i / 2] = static_cast<char>(start[i / 2] | (hex_nibble(hex_prefix[i]) << (i % 2 ? 0 : 4)));
  }
  std::string lower(hex_prefix);
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  return m_impl->run_read<std::vector<Digest>>([&](lmdb::Txn& txn) -> Result<std::vector<Digest>> {
    std::vector<Digest> out;
    int rc = txn.scan(Table::kRecords, start, [&](std::string_view k, std::string_view) {
      Digest d = digest_of(k);
      if (d.hex().compare(0, lower.size(), lower) != 0 || out.size() >= limit) return false;
      out.push_back(d);
      return true;
    });
    if (rc != 0) return tl::unexpected(m_impl->lmdb_error(rc, "scanning"));
    return out;
  });
}

Result<GcResult> Store::gc(const GcOptions& options, const ProgressFn& progress) {
  flush();
  GcResult result;
  int64_t now = now_ms();
  uint64_t limit = options.max_size.value_or(m_impl->options.max_size);
  // Pick victims from one snapshot: expired, too old, then LRU until under the limit.
  auto victims =
      m_impl->run_read<std::vector<Digest>>([&](lmdb::Txn& txn) -> Result<std::vector<Digest>> {
        std::vector<Digest> out;
        std::unordered_set<Digest> chosen;
        std::unordered_map<Digest, uint64_t> sizes;
        std::string_view raw;
        Counters c;
        if (txn.get(Table::kMeta, "counters", raw) == 0) c = decode_counters(raw);
        int rc = txn.scan(Table::kRecords, "", [&](std::string_view k, std::string_view v) {
          auto rec = decode_record(v);
          uint64_t size = v.size();
          if (rec) {
            for (const BodyRef& b : rec->bodies()) {
              std::string_view stored;
              if (txn.get(Table::kBodies, key_view(b.digest), stored) == 0) size += stored.size();
            }
          }
          sizes[digest_of(k)] = size;  // an upper bound when bodies are shared
          if (rec && rec->expires_ms && rec->expires_ms <= now &&
              chosen.insert(digest_of(k)).second) {
            out.push_back(digest_of(k));
            ++result.expired;
          }
          return true;
        });
        uint64_t stored = c.stored_bytes;
        for (const Digest& d : out) stored -= std::min(stored, sizes[d]);
        if (rc == 0) {
          rc = txn.scan(Table::kLru, "", [&](std::string_view k, std::string_view) {
            Digest d = entry_of_lru_key(k);
            int64_t used = 0;
            for (int i = 0; i < 8; ++i) used = used << 8 | static_cast<uint8_t>(k[i]);
            bool too_old = options.older_than_ms && used < now - *options.older_than_ms;
            if (!too_old && stored <= limit) return false;
            if (chosen.insert(d).second) {
              out.push_back(d);
              stored -= std::min(stored, sizes[d]);
            }
            return true;
          });
        }
        if (rc != 0) return tl::unexpected(m_impl->lmdb_error(rc, "scanning"));
        return out;
      });
  if (!victims) return tl::unexpected(victims.error());
  CCPOOL_TRY_ASSIGN(result.removed_entries,
                    remove_keys(*m_impl, *victims, true, progress, &result.freed_bytes));
  if (progress && victims->empty()) progress(0, 0);
  return result;
}

Result<VerifyResult> Store::verify(bool fix, const ProgressFn& progress) {
  VerifyResult result;
  auto keys =
      m_impl->run_read<std::vector<Digest>>([&](lmdb::Txn& txn) -> Result<std::vector<Digest>> {
        std::vector<Digest> out;
        int rc = txn.scan(Table::kRecords, "", [&](std::string_view k, std::string_view) {
          out.push_back(digest_of(k));
          return true;
        });
        if (rc != 0) return tl::unexpected(m_impl->lmdb_error(rc, "scanning"));
        return out;
      });
  if (!keys) return tl::unexpected(keys.error());
  std::unordered_set<Digest> checked_bodies;
  for (size_t i = 0; i < keys->size(); ++i) {
    const Digest& key = (*keys)[i];
    auto entry =
        m_impl->run_read<std::optional<Entry>>([&](lmdb::Txn& txn) -> Result<std::optional<Entry>> {
          auto e = m_impl->read_entry(txn, key, true);
          if (e && *e) {
            for (const Output& o : (*e)->outputs) checked_bodies.insert(o.checksum);
          }
          return e;
        });
    if (!entry && entry.error().code != ErrorCode::kCorruption)
      return tl::unexpected(entry.error());
    if (entry) ++result.checked_entries;
    if (!entry) result.corrupt.push_back({key, entry.error().message});
    if (progress) progress(i + 1, keys->size());
  }
  result.checked_entries += result.corrupt.size();
  result.checked_bodies = checked_bodies.size();
  if (fix && !result.corrupt.empty()) {
    std::vector<Digest> bad;
    for (const auto& c : result.corrupt) bad.push_back(c.key);
    CCPOOL_TRY_ASSIGN(result.removed, remove_keys(*m_impl, bad, false, {}));
    CCPOOL_TRY(m_impl->run_write([&](lmdb::Txn&, Counters& c, std::optional<Error>&) {
      c.corrupt_evictions += result.removed;
      return 0;
    }));
  }
  return result;
}

Result<uint64_t> Store::clear() {
  uint64_t removed = 0;
  {
    MutexLock lock(&m_impl->touch_mutex);
    m_impl->touches.clear();
  }
  CCPOOL_TRY(m_impl->run_write([&](lmdb::Txn& txn, Counters& c, std::optional<Error>&) {
    removed = txn.count(Table::kRecords);
    for (Table t : {Table::kRecords, Table::kUsage, Table::kLru, Table::kBodies, Table::kRefs}) {
      if (int rc = txn.drop_all(t); rc != 0) return rc;
    }
    c.entries = c.logical_bytes = c.stored_bytes = c.bodies = 0;
    return 0;
  }));
  return removed;
}

Result<void> Store::corrupt_body_for_testing(const Digest& key, size_t output_index) {
  return m_impl->run_write([&](lmdb::Txn& txn, Counters&, std::optional<Error>& error) {
    std::string_view raw;
    int rc = txn.get(Table::kRecords, key_view(key), raw);
    if (rc != 0) return rc;
    auto rec = decode_record(raw);
    if (!rec || output_index >= rec->outputs.size() || rec->outputs[output_index].body.size == 0) {
      error = Error(ErrorCode::kInvalidArgument,
                    "no stored body for output " + std::to_string(output_index));
      return kBodyFailed;
    }
    Digest body = rec->outputs[output_index].body.digest;
    if ((rc = txn.get(Table::kBodies, key_view(body), raw)) != 0) return rc;
    std::string damaged(raw);
    for (size_t i = kBodyHeaderSize + (damaged.size() - kBodyHeaderSize) / 2;
         i < damaged.size() && i < kBodyHeaderSize + (damaged.size() - kBodyHeaderSize) / 2 + 4;
         ++i) {
      damaged[i] = static_cast<char>(damaged[i] ^ 0x5a);
    }
    return txn.put(Table::kBodies, key_view(body), damaged);
  });
}

}  // namespace ccpool::cache
