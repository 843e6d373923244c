// Private to cache/: the state behind Store and the transaction helpers shared
// by store.cpp (get/put), store_admin.cpp (stats, gc, verify...) and archive.cpp.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/thread_annotations.h"
#include "cache/codec.h"
#include "cache/lmdb_env.h"
#include "cache/record.h"
#include "cache/store.h"

namespace ccpool::cache {

int64_t now_ms();
std::string_view key_view(const Digest& d);
Digest digest_of(std::string_view sixteen_bytes);

// One entry ready to be written: the encoded record and every body reference
// (duplicates included, so refcounts match Record::bodies()).
struct PreparedEntry {
  Digest key;
  std::string record;
  std::vector<std::pair<Digest, std::string>> bodies;  // digest -> stored body value
  uint64_t logical_bytes = 0;
  Usage usage;
  uint64_t stored_size() const;
};

// A write body returns an LMDB rc, or kBodyFailed after setting `error`.
inline constexpr int kBodyFailed = -30000;
using WriteBody =
    std::function<int(lmdb::Txn& txn, Counters& counters, std::optional<Error>& error)>;

struct Store::Impl {
  StoreOptions options;
  std::string dir;
  uint64_t map_cap = 0;
  std::unique_ptr<lmdb::Env> env;
  Codec codec{1};

  // Neither guards a member: env_mutex guards LMDB's map size (shared: any
  // open txn of this process; exclusive: a resize), write_mutex makes one write
  // txn of this process at a time and is taken before env_mutex.
  SharedMutex env_mutex;
  Mutex write_mutex ACQUIRED_BEFORE(env_mutex);
  std::atomic<uint64_t> read_txns{0};  // read transactions begun (Store::read_transactions)

  Mutex touch_mutex;
  std::unordered_map<Digest, Usage> touches GUARDED_BY(touch_mutex);  // hits are deltas
  Counters pending GUARDED_BY(touch_mutex);  // hits/misses/time_saved deltas
  std::map<std::string, uint64_t> pending_events GUARDED_BY(touch_mutex);  // count_event() deltas

  explicit Impl(int level) : codec(level) {}
  ~Impl();

  Error lmdb_error(int rc, const std::string& doing) const;

  // Runs `read` in a read txn, adopting a map grown by another process.
  template <typename T>
  Result<T> run_read(const std::function<Result<T>(lmdb::Txn&)>& read) {
    for (int attempt = 0;; ++attempt) {
      ReaderMutexLock lock(&env_mutex);
      std::unique_ptr<lmdb::Txn> txn;
      int rc = lmdb::Txn::begin(*env, false, txn);
      if (rc == lmdb::kMapResized && attempt < 3) {
        lock.unlock();
        adopt_map_size();
        continue;
      }
      if (rc != 0) return tl::unexpected(lmdb_error(rc, "begin read"));
      read_txns.fetch_add(1, std::memory_order_relaxed);
      return read(*txn);
    }
  }
  // Runs `body` in a write txn with the counters loaded and saved around it,
  // pending touches applied first; grows the map or evicts on MDB_MAP_FULL.
  Result<void> run_write(const WriteBody& body);
  void adopt_map_size();

  // Building blocks for write bodies. They return an LMDB rc.
  int insert_entry(lmdb::Txn& txn, const PreparedEntry& e, Counters& c);
  int remove_entry(lmdb::Txn& txn, const Digest& key, Counters& c, bool* found = nullptr);
  int evict_to(lmdb::Txn& txn, Counters& c, uint64_t limit,
               const std::unordered_set<Digest>& protect);
  int apply_touches(lmdb::Txn& txn, const std::unordered_map<Digest, Usage>& t, Counters& c);

  Result<PreparedEntry> prepare(const Digest& key, const Entry& entry);
  // Checks everything (structure, sizes against max_size, every body's checksum) before
  // anything is kept; memory is the packed bytes plus one decode slice.
  Result<PreparedEntry> prepare_packed(const Digest& key, std::string_view packed);
  // The packed form of one entry, read in `txn`; verify_bodies decodes every body first.
  Result<std::optional<std::string>> pack(lmdb::Txn& txn, const Digest& key, bool verify_bodies);
  // Writes entries in one txn; skip_existing leaves present keys alone (import).
  Result<uint64_t> write_entries(const std::vector<PreparedEntry>& batch, bool skip_existing);
  // Reads an entry; a corrupt one is a kCorruption error naming the problem.
  Result<std::optional<Entry>> read_entry(lmdb::Txn& txn, const Digest& key, bool with_bodies);
  void record_use(const Digest& key, bool hit, uint64_t time_saved_ms);
  void evict_corrupt(const Digest& key, const std::string& problem);

 private:
  Result<void> on_map_full(uint64_t need);
};

}  // namespace ccpool::cache
