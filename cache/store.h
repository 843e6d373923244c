// The content-addressed store: XXH3-128 keys -> versioned records in LMDB,
// output bodies zstd-compressed and deduplicated in their own table.
// Byte layouts and durability flags: docs/store-format.md.
//
// Thread safety: one Store per process per directory; any thread may call any
// method concurrently. Several processes may open the same directory at once
// (LMDB: one writer at a time, readers never block). Never use a Store after
// fork(); open a new one in the child.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/fault.h"
#include "base/fs.h"
#include "base/hash.h"

namespace ccpool::cache {

inline constexpr uint32_t kSchemaVersion = 1;

enum class EntryKind : uint8_t {
  kCompile = 1,
  kBlob = 2
};  // kBlob: plain key/value (Redis front, manifests)

struct Output {
  std::string name;
  uint32_t mode = 0644;
  uint64_t size = 0;  // raw bytes; put() computes it from data
  Digest checksum;    // XXH3-128 of the raw bytes; put() computes it from data
  std::string data;   // empty when read without bodies (peek(key, false))
};

struct Entry {
  EntryKind kind = EntryKind::kCompile;
  int64_t created_ms = 0, last_used_ms = 0;  // unix epoch ms; put() fills created/last_used if 0
  uint64_t hits = 0;
  uint64_t time_saved_ms = 0;   // duration of the original execution = what one hit saves
  std::vector<Output> outputs;  // put(): size/checksum computed by the store from data
  std::string stdout_data, stderr_data;
  int32_t exit_code = 0;
  std::string tool, cwd;
  std::vector<std::string> argv, inputs;  // descriptive metadata
  std::string label;  // free text; the Redis front stores the Redis key here (shown by ls/show)
  int64_t expires_ms =
      0;  // 0 = never; otherwise get() treats it as missing after this time and gc removes it
};

struct StoreOptions {
  std::string dir;
  uint64_t max_size = 10ull << 30;
  int compression_level = 1;
  uint64_t initial_map_size = 0;  // 0 = a sensible default; tests use tiny maps to exercise growth
  StatfsTypeFn statfs_type;       // seam (base/fs.h)
  bool create_if_missing = true;  // false: a missing directory is kNotFound (CLI commands)
  uint64_t max_map_size = 0;      // cap of the LMDB map; 0 = 2 * max_size + 64 MiB
  FaultInjector* faults =
      &FaultInjector::none();  // seam (base/fault.h): fail_store_write; not owned
};

// One line of `ccpool cache ls`.
struct EntrySummary {
  Digest key;
  EntryKind kind = EntryKind::kCompile;
  int64_t created_ms = 0, last_used_ms = 0, expires_ms = 0;
  uint64_t hits = 0, time_saved_ms = 0;
  uint64_t logical_bytes = 0;  // raw outputs + stdout + stderr
  uint32_t output_count = 0;
  std::string tool, label;
};

struct StoreStats {
  uint64_t entries = 0, bodies = 0;
  uint64_t logical_bytes = 0;  // what the entries would take uncompressed and undeduplicated
  uint64_t stored_bytes = 0;   // compressed unique bodies + records: what max_size bounds
  uint64_t hits = 0, misses = 0, time_saved_ms = 0;  // time_saved_ms: summed over hits
  uint64_t evictions = 0, corrupt_evictions = 0;
  int64_t oldest_ms = 0, newest_ms = 0;  // created_ms bounds; 0 when empty
  uint64_t map_size = 0, map_used = 0, max_size = 0;
  uint32_t schema_version = kSchemaVersion;
  std::map<std::string, uint64_t> events;  // count_event() totals by name
};

// Store::get of an entry whose expiry passed: kHide answers nullopt; kKeep
// returns it (still counted as a miss, not touched), for a caller that must
// tell "expired here" from "absent" without a second read.
enum class Expired { kHide, kKeep };

enum class SortBy { kUsed, kSize, kHits };

struct GcOptions {
  std::optional<uint64_t> max_size;      // evict LRU down to this; default: the store's max_size
  std::optional<int64_t> older_than_ms;  // also evict entries last used longer ago than this
};
struct GcResult {
  uint64_t removed_entries = 0, expired = 0, freed_bytes = 0;
};

struct CorruptEntry {
  Digest key;
  std::string problem;
};
struct VerifyResult {
  uint64_t checked_entries = 0, checked_bodies = 0, removed = 0;
  std::vector<CorruptEntry> corrupt;
};

struct ArchiveResult {
  uint64_t entries = 0, skipped = 0, bytes = 0;
};

// One member of Store::put_batch (and of a GroupCommitter batch).
struct PutRequest {
  Digest key;
  Entry entry;
};

struct PreparedEntry;  // store_impl.h

// An entry already hashed, compressed and encoded for writing
// (Store::prepare_put, on any thread); Store::write_prepared writes a batch.
class PreparedPut {
 public:
  PreparedPut();
  ~PreparedPut();
  PreparedPut(PreparedPut&&) noexcept;
  PreparedPut& operator=(PreparedPut&&) noexcept;
  const Digest& key() const;  // all zeros once moved from

 private:
  friend class Store;
  std::unique_ptr<PreparedEntry> m_entry;
};

// Called with (done, total) as long operations advance; total may be 0 when unknown.
using ProgressFn = std::function<void(uint64_t done, uint64_t total)>;

class Store {
 public:
  static Result<std::unique_ptr<Store>> open(const StoreOptions& options);
  ~Store();  // flushes buffered LRU touches and counters
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Verified bodies; corrupt -> evict+count+log, returns nullopt; counts hit/miss; records the use
  // for LRU (buffered, not a write txn per get).
  Result<std::optional<Entry>> get(const Digest& key, Expired expired = Expired::kHide);
  // No counters, no touch (for show/ls). Without bodies, outputs carry name/mode/size/checksum
  // only.
  Result<std::optional<Entry>> peek(const Digest& key, bool with_bodies);
  // Replaces. Enforces max_size by evicting LRU; on MDB_MAP_FULL grows and retries. Failure is
  // reported (kFull/kIo), never crashes, never loses committed entries.
  Result<void> put(const Digest& key, const Entry& entry);
  // Writes every request in ONE write transaction, in order (a later request
  // for the same key replaces an earlier one). One result per request: an
  // entry invalid on its own (over max_size) fails alone; a failed transaction
  // fails every other member with its error. cache/group_commit.h batches
  // concurrent puts through this.
  std::vector<Result<void>> put_batch(const std::vector<PutRequest>& batch);
  // put_batch in two steps, so the CPU work (hashing, compression) can run on
  // the callers' threads: prepare_put fails alone (over max_size);
  // write_prepared consumes the batch (same results as put_batch).
  Result<PreparedPut> prepare_put(const Digest& key, const Entry& entry);
  std::vector<Result<void>> write_prepared(std::vector<PreparedPut>& batch);
  Result<bool> remove(const Digest& key);

  // Self-contained, checksummed, versioned serialization of one entry with its bodies still
  // zstd-compressed exactly as stored (no recompression). Used by export/import AND by the
  // Redis tier as the wire value.
  Result<std::optional<std::string>> get_packed(const Digest& key);
  // Fully validates (structure+every checksum) BEFORE writing; kCorruption otherwise.
  Result<void> put_packed(const Digest& key, std::string_view packed);

  void flush();  // writes buffered touches/counters; the service calls this every few seconds

  // Named event counters kept with the store's own (the service counts
  // "passthrough:<reason>" and "not_stored:<reason>"), buffered like hits and
  // written by the next write or flush(). Bounded: names are cut to
  // kMaxEventName bytes, and past kMaxEvents distinct names new ones count
  // as "other".
  static constexpr size_t kMaxEvents = 512;
  static constexpr size_t kMaxEventName = 96;
  void count_event(std::string_view name, uint64_t n = 1);

  // --- inspection and maintenance (the `ccpool cache` CLI) ---
  Result<StoreStats> stats();
  Result<std::vector<EntrySummary>> list(SortBy sort, size_t limit = 0);  // limit 0 = all
  // Keys whose hex starts with `hex_prefix` (lowercase or uppercase hex), at most `limit`.
  Result<std::vector<Digest>> find_prefix(std::string_view hex_prefix, size_t limit = 16);
  Result<GcResult> gc(const GcOptions& options, const ProgressFn& progress = {});
  Result<VerifyResult> verify(bool fix, const ProgressFn& progress = {});
  Result<uint64_t> clear();  // returns the number of entries removed
  // Archive: see docs/store-format.md. Import validates the whole archive before writing anything
  // and skips keys already present.
  Result<ArchiveResult> export_to(const std::string& path, const ProgressFn& progress = {});
  Result<ArchiveResult> import_from(const std::string& path, const ProgressFn& progress = {});
  Result<int> reader_check();  // clears reader slots of dead processes; returns how many

  const std::string& dir() const;
  uint64_t max_size() const;
  // Read transactions this Store began (get, peek, get_packed, stats...): what
  // a test counts to prove a path reads the store once.
  uint64_t read_transactions() const;

  // Test seam: flips bytes inside the stored (compressed) body of output `output_index`.
  Result<void> corrupt_body_for_testing(const Digest& key, size_t output_index);

  struct Impl;

 private:
  explicit Store(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

}  // namespace ccpool::cache
