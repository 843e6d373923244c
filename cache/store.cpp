// Store: open, get/peek/put/remove, packed entries and buffered use tracking.
#include "cache/store.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <climits>
#include <cstdlib>
#include <set>

#include "base/fault.h"
#include "base/paths.h"
#include "cache/store_impl.h"

namespace ccpool::cache {
namespace {

using lmdb::Table;

constexpr uint64_t kDefaultInitialMap = 256ull << 20;
constexpr uint64_t kMinMap = 256ull << 10;
// Buffered touches are written by the next put/flush, or here at the latest.
constexpr size_t kMaxBufferedTouches = 4096;

// LMDB forbids opening one environment twice in a process (its POSIX locks
// would be dropped by the second close); this registry turns that into an error.
struct OpenStores {
  Mutex mutex;
  std::set<std::string> dirs GUARDED_BY(mutex);  // canonical paths
};
OpenStores& open_stores() {
  static auto* s = new OpenStores;  // leaked: no static destructors
  return *s;
}
std::string canonical(const std::string& dir) {
  char buf[PATH_MAX];
  return ::realpath(dir.c_str(), buf) ? std::string(buf) : dir;
}

Result<void> check_schema(Store::Impl& impl) {
  return impl.run_write([&](lmdb::Txn& txn, Counters& c, std::optional<Error>& error) {
    std::string_view raw;
    uint32_t version = 0;
    int rc = txn.get(Table::kMeta, "schema", raw);
    if (rc == 0 && raw.size() == 4) std::memcpy(&version, raw.data(), 4);
    bool empty = txn.count(Table::kRecords) == 0;
    if (rc == 0 && version == kSchemaVersion) return 0;
    if (version > kSchemaVersion) {
      error =
          Error(ErrorCode::kUnsupported,
                "the store in '" + impl.dir + "' has schema version " + std::to_string(version) +
                    ", newer than this ccpool understands (" + std::to_string(kSchemaVersion) +
                    "); upgrade ccpool or use another --dir/CCPOOL_DIR");
      return kBodyFailed;
    }
    if (!empty) {
      spdlog::warn("cache: the store in '{}' has old schema version {}; cleared it (it refills)",
                   impl.dir, version);
      for (Table t : {Table::kRecords, Table::kUsage, Table::kLru, Table::kBodies, Table::kRefs}) {
        if ((rc = txn.drop_all(t)) != 0) return rc;
      }
      c = Counters{};
    }
    uint32_t v = kSchemaVersion;
    return txn.put(Table::kMeta, "schema", std::string_view(reinterpret_cast<char*>(&v), 4));
  });
}

}  // namespace

Store::Impl::~Impl() {
  OpenStores& stores = open_stores();
  MutexLock lock(&stores.mutex);
  stores.dirs.erase(canonical(dir));
}

Result<std::unique_ptr<Store>> Store::open(const StoreOptions& options) {
  std::string dir = default_store_dir(options.dir);
  if (!options.create_if_missing && !path_exists(dir)) {
    return make_error(
        ErrorCode::kNotFound,
        "no store at '" + dir + "' (the directory does not exist); check --dir or CCPOOL_DIR");
  }
  CCPOOL_TRY(ensure_private_dir(dir));
  CCPOOL_TRY(check_local_filesystem(dir, "CCPOOL_DIR", options.statfs_type));
  auto impl = std::make_unique<Impl>(options.compression_level);
  impl->options = options;
  impl->dir = dir;
  {
    OpenStores& stores = open_stores();
    MutexLock lock(&stores.mutex);
    if (!stores.dirs.insert(canonical(dir)).second) {
      impl->dir.clear();  // not ours to unregister
      return make_error(
          ErrorCode::kInvalidArgument,
          "the store in '" + dir + "' is already open in this process; share that Store");
    }
  }
  uint64_t initial = options.initial_map_size ? options.initial_map_size : kDefaultInitialMap;
  initial = std::max(kMinMap, (initial + 4095) & ~uint64_t{4095});
  impl->map_cap = options.max_map_size
                      ? std::max(options.max_map_size, initial)
                      : std::max<uint64_t>(initial, options.max_size * 2 + (64ull << 20));
  initial = std::min(initial, impl->map_cap);
  int rc = lmdb::Env::open(dir, initial, impl->env);
  if (rc != 0) {
    impl->env.reset();
    return tl::unexpected(impl->lmdb_error(rc, "opening the store"));
  }
  CCPOOL_TRY(check_schema(*impl));
  return std::unique_ptr<Store>(new Store(std::move(impl)));
}

Store::Store(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}

Store::~Store() {
  if (m_impl && m_impl->env) flush();
}

const std::string& Store::dir() const {
  return m_impl->dir;
}
uint64_t Store::max_size() const {
  return m_impl->options.max_size;
}
uint64_t Store::read_transactions() const {
  return m_impl->read_txns.load(std::memory_order_relaxed);
}

Result<PreparedEntry> Store::Impl::prepare(const Digest& key, const Entry& entry) {
  PreparedEntry p;
  p.key = key;
  Record rec;
  rec.kind = entry.kind;
  rec.created_ms = entry.created_ms ? entry.created_ms : now_ms();
  rec.time_saved_ms = entry.time_saved_ms;
  rec.expires_ms = entry.expires_ms;
  rec.exit_code = entry.exit_code;
  rec.tool = entry.tool;
  rec.cwd = entry.cwd;
  rec.label = entry.label;
  rec.argv = entry.argv;
  rec.inputs = entry.inputs;
  auto add_body = [&](std::string_view data) {
    BodyRef ref{data.size(), hash_bytes(data)};
    if (ref.size) p.bodies.emplace_back(ref.digest, codec.encode(data));
    return ref;
  };
  for (const Output& out : entry.outputs)
    rec.outputs.push_back({out.name, out.mode, add_body(out.data)});
  rec.stdout_body = add_body(entry.stdout_data);
  rec.stderr_body = add_body(entry.stderr_data);
  p.record = encode_record(rec);
  p.logical_bytes = rec.logical_bytes();
  p.usage = Usage{entry.last_used_ms ? entry.last_used_ms : now_ms(), entry.hits};
  if (p.stored_size() > options.max_size) {
    return make_error(ErrorCode::kFull,
                      "entry " + key.hex() + " needs " + std::to_string(p.stored_size()) +
                          " bytes, more than the store's max_size of " +
                          std::to_string(options.max_size) + "; raise --max-size");
  }
  return p;
}

Result<PreparedEntry> Store::Impl::prepare_packed(const Digest& key, std::string_view packed) {
  CCPOOL_TRY_ASSIGN(UnpackedEntry u, unpack_entry(packed));
  CCPOOL_TRY_ASSIGN(Record rec, decode_record(u.record));
  std::unordered_map<Digest, std::string_view> bodies;
  for (const PackedBody& b : u.bodies) bodies.emplace(b.digest, b.stored);
  // Sizes come from outside: no body may claim more raw bytes than the whole
  // store may hold, and the sum is checked without overflowing.
  uint64_t logical = 0;
  for (const BodyRef& ref : rec.bodies()) {
    if (ref.size > options.max_size || logical + ref.size > options.max_size) {
      return make_error(ErrorCode::kFull,
                        "entry " + key.hex() +
                            " declares more raw bytes than the store's max_size of " +
                            std::to_string(options.max_size) + "; raise --max-size");
    }
    logical += ref.size;
  }
  PreparedEntry p;
  p.key = key;
  p.record.assign(u.record);
  p.logical_bytes = logical;
  p.usage = Usage{now_ms(), 0};
  std::unordered_set<Digest> verified;
  for (const BodyRef& ref : rec.bodies()) {
    auto it = bodies.find(ref.digest);
    uint64_t raw_size = 0;
    if (it == bodies.end() || !Codec::header_ok(it->second, &raw_size) || raw_size != ref.size) {
      return make_error(ErrorCode::kCorruption,
                        "packed entry " + key.hex() + " lacks body " + ref.digest.hex());
    }
    if (verified.insert(ref.digest).second) {
      CCPOOL_TRY(codec.verify(it->second, ref.digest, "packed entry " + key.hex(), ref.size));
    }
    p.bodies.emplace_back(ref.digest, std::string(it->second));
  }
  if (p.stored_size() > options.max_size) {
    return make_error(ErrorCode::kFull,
                      "entry " + key.hex() + " is larger than the store's max_size; raise it");
  }
  return p;
}

Result<uint64_t> Store::Impl::write_entries(const std::vector<PreparedEntry>& batch,
                                            bool skip_existing) {
  if (options.faults->should_fail_store_write()) {
    return make_error(
        ErrorCode::kIo,
        "store write to '" + dir +
            "' failed (injected by CCPOOL_FAULT=fail_store_write); unset CCPOOL_FAULT");
  }
  uint64_t skipped = 0;
  std::unordered_set<Digest> keys;
  for (const auto& e : batch) keys.insert(e.key);
  CCPOOL_TRY(run_write([&](lmdb::Txn& txn, Counters& c, std::optional<Error>&) {
    skipped = 0;
    for (const auto& e : batch) {
      std::string_view raw;
      bool present = txn.get(Table::kRecords, key_view(e.key), raw) == 0;
      if (present && skip_existing) {
        ++skipped;
        continue;
      }
      int rc = present ? remove_entry(txn, e.key, c) : 0;
      if (rc == 0) rc = insert_entry(txn, e, c);
      if (rc != 0) return rc;
    }
    return evict_to(txn, c, options.max_size, keys);
  }));
  return skipped;
}

Result<std::optional<Entry>> Store::Impl::read_entry(lmdb::Txn& txn, const Digest& key,
                                                     bool with_bodies) {
  std::string_view raw;
  int rc = txn.get(Table::kRecords, key_view(key), raw);
  if (rc == lmdb::kNotFound) return std::optional<Entry>();
  if (rc != 0) return tl::unexpected(lmdb_error(rc, "reading"));
  CCPOOL_TRY_ASSIGN(Record rec, decode_record(raw));
  Entry e;
  e.kind = rec.kind;
  e.created_ms = rec.created_ms;
  e.time_saved_ms = rec.time_saved_ms;
  e.expires_ms = rec.expires_ms;
  e.exit_code = rec.exit_code;
  e.tool = std::move(rec.tool);
  e.cwd = std::move(rec.cwd);
  e.label = std::move(rec.label);
  e.argv = std::move(rec.argv);
  e.inputs = std::move(rec.inputs);
  if (txn.get(Table::kUsage, key_view(key), raw) == 0) {
    Usage u = decode_usage(raw);
    e.last_used_ms = u.last_used_ms;
    e.hits = u.hits;
  }
  auto load = [&](const BodyRef& ref, std::string& out) -> Result<void> {
    if (!with_bodies || ref.size == 0) return ok();
    std::string_view stored;
    if (txn.get(Table::kBodies, key_view(ref.digest), stored) != 0) {
      return make_error(ErrorCode::kCorruption, "body " + ref.digest.hex() + " is missing");
    }
    CCPOOL_TRY_ASSIGN(out, codec.decode(stored, ref.digest, "body " + ref.digest.hex(), ref.size));
    if (out.size() != ref.size)
      return make_error(ErrorCode::kCorruption, "body " + ref.digest.hex() + " has the wrong size");
    return ok();
  };
  for (const RecordOutput& o : rec.outputs) {
    Output out{o.name, o.mode, o.body.size, o.body.digest, {}};
    CCPOOL_TRY(load(o.body, out.data));
    e.outputs.push_back(std::move(out));
  }
  CCPOOL_TRY(load(rec.stdout_body, e.stdout_data));
  CCPOOL_TRY(load(rec.stderr_body, e.stderr_data));
  return std::optional<Entry>(std::move(e));
}

void Store::Impl::record_use(const Digest& key, bool hit, uint64_t time_saved_ms) {
  MutexLock lock(&touch_mutex);
  if (!hit) {
    pending.misses += 1;
    return;
  }
  pending.hits += 1;
  pending.time_saved_ms += time_saved_ms;
  Usage& u = touches[key];
  u.last_used_ms = now_ms();
  u.hits += 1;
}

void Store::Impl::evict_corrupt(const Digest& key, const std::string& problem) {
  spdlog::warn("cache: entry {} in '{}' is corrupt ({}); evicted it, it will be rebuilt", key.hex(),
               dir, problem);
  auto r = run_write([&](lmdb::Txn& txn, Counters& c, std::optional<Error>&) {
    bool found = false;
    int rc = remove_entry(txn, key, c, &found);
    if (found) c.corrupt_evictions += 1;
    return rc;
  });
  if (!r) spdlog::warn("cache: could not evict corrupt entry {}: {}", key.hex(), r.error().message);
}

Result<std::optional<Entry>> Store::get(const Digest& key, Expired expired) {
  auto entry = m_impl->run_read<std::optional<Entry>>(
      [&](lmdb::Txn& txn) { return m_impl->read_entry(txn, key, true); });
  if (!entry && entry.error().code == ErrorCode::kCorruption) {
    m_impl->evict_corrupt(key, entry.error().message);
    entry = std::optional<Entry>();
  }
  if (!entry) return entry;
  bool hit = entry->has_value() && ((*entry)->expires_ms == 0 || (*entry)->expires_ms > now_ms());
  m_impl->record_use(key, hit, hit ? (*entry)->time_saved_ms : 0);
  if (!hit && expired == Expired::kHide) entry->reset();
  bool full;
  {
    MutexLock lock(&m_impl->touch_mutex);
    full = m_impl->touches.size() >= kMaxBufferedTouches;
  }
  if (full) flush();
  return entry;
}

Result<std::optional<Entry>> Store::peek(const Digest& key, bool with_bodies) {
  return m_impl->run_read<std::optional<Entry>>(
      [&](lmdb::Txn& txn) { return m_impl->read_entry(txn, key, with_bodies); });
}

Result<void> Store::put(const Digest& key, const Entry& entry) {
  CCPOOL_TRY_ASSIGN(PreparedEntry p, m_impl->prepare(key, entry));
  CCPOOL_TRY(m_impl->write_entries({std::move(p)}, false));
  return ok();
}

namespace {

// Writes `prepared` in one transaction. A batch that does not fit the map even
// after eviction (kFull) is split in halves, so a batch never fails where the
// same puts made one by one would succeed; any other failure fails every member.
void write_split(Store::Impl& impl, std::vector<PreparedEntry>& prepared,
                 const std::vector<size_t>& members, std::vector<Result<void>>& results) {
  if (prepared.empty()) return;
  auto written = impl.write_entries(prepared, false);
  if (written) return;
  if (written.error().code == ErrorCode::kFull && prepared.size() > 1) {
    size_t half = prepared.size() / 2;
    std::vector<PreparedEntry> tail(std::make_move_iterator(prepared.begin() + half),
                                    std::make_move_iterator(prepared.end()));
    prepared.resize(half);
    std::vector<size_t> head_members(members.begin(), members.begin() + half);
    std::vector<size_t> tail_members(members.begin() + half, members.end());
    write_split(impl, prepared, head_members, results);
    write_split(impl, tail, tail_members, results);
    return;
  }
  for (size_t i : members) results[i] = tl::unexpected(written.error());
}

}  // namespace

std::vector<Result<void>> Store::put_batch(const std::vector<PutRequest>& batch) {
  std::vector<Result<void>> results(batch.size(), ok());
  std::vector<PreparedEntry> prepared;
  std::vector<size_t> members;  // index in `batch` of each prepared entry
  prepared.reserve(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    auto p = m_impl->prepare(batch[i].key, batch[i].entry);
    if (!p) {
      results[i] = tl::unexpected(std::move(p.error()));
      continue;
    }
    prepared.push_back(std::move(*p));
    members.push_back(i);
  }
  write_split(*m_impl, prepared, members, results);
  return results;
}

PreparedPut::PreparedPut() = default;
PreparedPut::~PreparedPut() = default;
PreparedPut::PreparedPut(PreparedPut&&) noexcept = default;
PreparedPut& PreparedPut::operator=(PreparedPut&&) noexcept = default;
const Digest& PreparedPut::key() const {
  static const Digest kNone{};
  return m_entry ? m_entry->key : kNone;
}

Result<PreparedPut> Store::prepare_put(const Digest& key, const Entry& entry) {
  CCPOOL_TRY_ASSIGN(PreparedEntry p, m_impl->prepare(key, entry));
  PreparedPut out;
  out.m_entry = std::make_unique<PreparedEntry>(std::move(p));
  return out;
}

std::vector<Result<void>> Store::write_prepared(std::vector<PreparedPut>& batch) {
  std::vector<Result<void>> results(batch.size(), ok());
  std::vector<PreparedEntry> prepared;
  std::vector<size_t> members;
  prepared.reserve(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!batch[i].m_entry) {
      results[i] = make_error(ErrorCode::kInvalidArgument,
                              "write_prepared: an empty PreparedPut (moved from)");
      continue;
    }
    prepared.push_back(std::move(*batch[i].m_entry));
    batch[i].m_entry.reset();
    members.push_back(i);
  }
  write_split(*m_impl, prepared, members, results);
  return results;
}

Result<bool> Store::remove(const Digest& key) {
  bool found = false;
  CCPOOL_TRY(m_impl->run_write([&](lmdb::Txn& txn, Counters& c, std::optional<Error>&) {
    return m_impl->remove_entry(txn, key, c, &found);
  }));
  return found;
}

Result<std::optional<std::string>> Store::Impl::pack(lmdb::Txn& txn, const Digest& key,
                                                     bool verify_bodies) {
  std::string_view record;
  int rc = txn.get(Table::kRecords, key_view(key), record);
  if (rc == lmdb::kNotFound) return std::optional<std::string>();
  if (rc != 0) return tl::unexpected(lmdb_error(rc, "reading"));
  CCPOOL_TRY_ASSIGN(Record rec, decode_record(record));
  std::vector<PackedBody> bodies;
  std::unordered_set<Digest> seen;
  for (const BodyRef& ref : rec.bodies()) {
    if (!seen.insert(ref.digest).second) continue;
    std::string_view stored;
    if (txn.get(Table::kBodies, key_view(ref.digest), stored) != 0) {
      return make_error(ErrorCode::kCorruption,
                        "entry " + key.hex() + ": body " + ref.digest.hex() + " is missing");
    }
    if (verify_bodies) CCPOOL_TRY(codec.verify(stored, ref.digest, "entry " + key.hex(), ref.size));
    bodies.push_back({ref.digest, stored});
  }
  return std::optional<std::string>(pack_entry(record, bodies));
}

Result<std::optional<std::string>> Store::get_packed(const Digest& key) {
  return m_impl->run_read<std::optional<std::string>>(
      [&](lmdb::Txn& txn) { return m_impl->pack(txn, key, false); });
}

Result<void> Store::put_packed(const Digest& key, std::string_view packed) {
  CCPOOL_TRY_ASSIGN(PreparedEntry p, m_impl->prepare_packed(key, packed));
  CCPOOL_TRY(m_impl->write_entries({std::move(p)}, false));
  return ok();
}

void Store::count_event(std::string_view name, uint64_t n) {
  std::string key(name.substr(0, kMaxEventName));
  MutexLock lock(&m_impl->touch_mutex);
  std::map<std::string, uint64_t>& pending = m_impl->pending_events;
  if (pending.size() < kMaxEvents || pending.count(key))
    pending[key] += n;
  else
    pending["other"] += n;
}

void Store::flush() {
  bool idle;
  {
    MutexLock lock(&m_impl->touch_mutex);
    idle = m_impl->touches.empty() && m_impl->pending.hits == 0 && m_impl->pending.misses == 0 &&
           m_impl->pending_events.empty();
  }
  if (!idle) {
    auto r = m_impl->run_write([](lmdb::Txn&, Counters&, std::optional<Error>&) { return 0; });
    if (!r) spdlog::warn("cache: could not write usage counters: {}", r.error().message);
  }
  (void)reader_check();
  m_impl->env->sync();
}

Result<int> Store::reader_check() {
  int dead = 0;
  int rc = m_impl->env->reader_check(&dead);
  if (rc != 0) return tl::unexpected(m_impl->lmdb_error(rc, "checking readers"));
  return dead;
}

}  // namespace ccpool::cache
