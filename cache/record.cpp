#include "cache/record.h"

#include "cache/bytes.h"

namespace ccpool::cache {
namespace {

constexpr std::string_view kPackedMagic = "CCPE";
// Bounds that stop a corrupt length from allocating gigabytes.
constexpr uint32_t kMaxListItems = 1u << 20;

void put_body(ByteWriter& w, const BodyRef& b) {
  w.u64(b.size);
  w.digest(b.digest);
}
bool get_body(ByteReader& r, BodyRef& b) {
  return r.u64(b.size) && r.digest(b.digest);
}

void put_list(ByteWriter& w, const std::vector<std::string>& items) {
  w.u32(static_cast<uint32_t>(items.size()));
  for (const auto& s : items) w.str(s);
}
bool get_list(ByteReader& r, std::vector<std::string>& items) {
  uint32_t n;
  if (!r.u32(n) || n > kMaxListItems || n > r.left() / 4) return false;
  items.resize(n);
  for (auto& s : items) {
    if (!r.str(s)) return false;
  }
  return true;
}

}  // namespace

uint64_t Record::logical_bytes() const {
  uint64_t total = stdout_body.size + stderr_body.size;
  for (const auto& o : outputs) total += o.body.size;
  return total;
}

std::vector<BodyRef> Record::bodies() const {
  std::vector<BodyRef> out;
  for (const auto& o : outputs) {
    if (o.body.size) out.push_back(o.body);
  }
  if (stdout_body.size) out.push_back(stdout_body);
  if (stderr_body.size) out.push_back(stderr_body);
  return out;
}

std::string encode_record(const Record& rec) {
  ByteWriter w;
  w.u8(kRecordVersion);
  w.u8(static_cast<uint8_t>(rec.kind));
  w.i64(rec.created_ms);
  w.u64(rec.time_saved_ms);
  w.i64(rec.expires_ms);
  w.u32(static_cast<uint32_t>(rec.exit_code));
  w.str(rec.tool);
  w.str(rec.cwd);
  w.str(rec.label);
  put_list(w, rec.argv);
  put_list(w, rec.inputs);
  put_body(w, rec.stdout_body);
  put_body(w, rec.stderr_body);
  w.u32(static_cast<uint32_t>(rec.outputs.size()));
  for (const auto& o : rec.outputs) {
    w.str(o.name);
    w.u32(o.mode);
    put_body(w, o.body);
  }
  Digest sum = hash_bytes(w.out());
  w.digest(sum);
  return std::move(w.out());
}

Result<Record> decode_record(std::string_view bytes) {
  uint8_t version = bytes.empty() ? 0 : static_cast<uint8_t>(bytes[0]);
  if (version > kRecordVersion) {
    return make_error(ErrorCode::kCorruption,
                      "record from a newer ccpool (version " + std::to_string(version) + ")");
  }
  if (version < kRecordVersion) {
    return make_error(ErrorCode::kCorruption,
                      "record version " + std::to_string(version) +
                          " has no checksum (an older ccpool wrote it); it is rebuilt");
  }
  if (bytes.size() < 1 + kRecordChecksumSize)
    return make_error(ErrorCode::kCorruption, "malformed record");
  std::string_view fields = bytes.substr(0, bytes.size() - kRecordChecksumSize);
  Digest trailer;
  std::memcpy(trailer.bytes.data(), bytes.data() + fields.size(), kRecordChecksumSize);
  if (hash_bytes(fields) != trailer) {
    return make_error(ErrorCode::kCorruption, "record fails its checksum (damaged)");
  }
  ByteReader r(fields);
  Record rec;
  uint8_t kind = 0;
  uint32_t n_outputs = 0;
  bool ok = r.u8(version) && r.u8(kind) &&
            (kind == static_cast<uint8_t>(EntryKind::kCompile) ||
             kind == static_cast<uint8_t>(EntryKind::kBlob)) &&
            r.i64(rec.created_ms) && r.u64(rec.time_saved_ms) && r.i64(rec.expires_ms) &&
            r.i32(rec.exit_code) && r.str(rec.tool) && r.str(rec.cwd) && r.str(rec.label) &&
            get_list(r, rec.argv) && get_list(r, rec.inputs) && get_body(r, rec.stdout_body) &&
            get_body(r, rec.stderr_body) && r.u32(n_outputs) && n_outputs <= r.left() / 32;
  if (ok) {
    rec.kind = static_cast<EntryKind>(kind);
    rec.outputs.resize(n_outputs);
    for (auto& o : rec.outputs) {
      if (!(ok = r.str(o.name) && r.u32(o.mode) && get_body(r, o.body))) break;
    }
  }
  if (!ok || r.left() != 0) return make_error(ErrorCode::kCorruption, "malformed record");
  return rec;
}

std::string encode_usage(const Usage& usage) {
  ByteWriter w;
  w.i64(usage.last_used_ms);
  w.u64(usage.hits);
  return std::move(w.out());
}

Usage decode_usage(std::string_view bytes) {
  ByteReader r(bytes);
  Usage u;
  if (!r.i64(u.last_used_ms) || !r.u64(u.hits)) return Usage{};
  return u;
}

std::string lru_key(int64_t last_used_ms, const Digest& key) {
  std::string out(24, '\0');
  auto v = static_cast<uint64_t>(last_used_ms < 0 ? 0 : last_used_ms);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(v >> (56 - 8 * i));
  std::memcpy(out.data() + 8, key.bytes.data(), 16);
  return out;
}

Digest entry_of_lru_key(std::string_view lru) {
  Digest d;
  if (lru.size() == 24) std::memcpy(d.bytes.data(), lru.data() + 8, 16);
  return d;
}

std::string encode_counters(const Counters& c) {
  ByteWriter w;
  for (uint64_t v : {c.hits, c.misses, c.time_saved_ms, c.evictions, c.corrupt_evictions, c.entries,
                     c.logical_bytes, c.stored_bytes, c.bodies}) {
    w.u64(v);
  }
  return std::move(w.out());
}

Counters decode_counters(std::string_view bytes) {
  ByteReader r(bytes);
  Counters c;
  for (uint64_t* v : {&c.hits, &c.misses, &c.time_saved_ms, &c.evictions, &c.corrupt_evictions,
                      &c.entries, &c.logical_bytes, &c.stored_bytes, &c.bodies}) {
    if (!r.u64(*v)) break;
  }
  return c;
}

std::string encode_events(const std::map<std::string, uint64_t>& events) {
  ByteWriter w;
  w.u32(1);
  w.u32(static_cast<uint32_t>(events.size()));
  for (const auto& [name, n] : events) {
    w.str(name);
    w.u64(n);
  }
  return std::move(w.out());
}

std::map<std::string, uint64_t> decode_events(std::string_view bytes) {
  ByteReader r(bytes);
  uint32_t version = 0, count = 0;
  std::map<std::string, uint64_t> out;
  if (!r.u32(version) || version != 1 || !r.u32(count) || count > Store::kMaxEvents + 1) return {};
  for (uint32_t i = 0; i < count; ++i) {
    std::string name;
    uint64_t n = 0;
    if (!r.str(name) || !r.u64(n) || name.size() > Store::kMaxEventName) return {};
    out[name] += n;
  }
  return out;
}

void merge_events(std::map<std::string, uint64_t>& total,
                  const std::map<std::string, uint64_t>& delta) {
  for (const auto& [name, n] : delta) {
    auto it = total.find(name);
    if (it != total.end())
      it->second += n;
    else if (total.size() < Store::kMaxEvents)
      total.emplace(name, n);
    else
      total["other"] += n;
  }
}

std::string pack_entry(std::string_view record, const std::vector<PackedBody>& bodies) {
  ByteWriter w;
  w.bytes(kPackedMagic);
  w.u32(kPackedVersion);
  w.str(record);
  w.u32(static_cast<uint32_t>(bodies.size()));
  for (const auto& b : bodies) {
    w.digest(b.digest);
    w.u64(b.stored.size());
    w.bytes(b.stored);
  }
  Digest sum = hash_bytes(w.out());
  w.digest(sum);
  return std::move(w.out());
}

Result<UnpackedEntry> unpack_entry(std::string_view packed) {
  auto corrupt = [](const std::string& why) {
    return make_error(ErrorCode::kCorruption, "packed entry " + why);
  };
  if (packed.size() < kPackedMagic.size() + 4 + 16 || packed.substr(0, 4) != kPackedMagic) {
    return corrupt("has no CCPE header (not a ccpool entry)");
  }
  std::string_view body = packed.substr(0, packed.size() - 16);
  Digest trailer;
  std::memcpy(trailer.bytes.data(), packed.data() + body.size(), 16);
  ByteReader r(body.substr(4));
  uint32_t version = 0, record_len = 0, count = 0;
  r.u32(version);
  if (version > kPackedVersion) {
    return make_error(ErrorCode::kUnsupported, "packed entry version " + std::to_string(version) +
                                                   " is newer than this ccpool supports (" +
                                                   std::to_string(kPackedVersion) +
                                                   "); upgrade ccpool");
  }
  if (hash_bytes(body) != trailer) return corrupt("fails its checksum (truncated or damaged)");
  UnpackedEntry out;
  if (version != kPackedVersion || !r.u32(record_len) || !r.view(record_len, out.record) ||
      !r.u32(count) || count > r.left() / 24) {
    return corrupt("is malformed");
  }
  out.bodies.resize(count);
  for (auto& b : out.bodies) {
    uint64_t len = 0;
    if (!r.digest(b.digest) || !r.u64(len) || len > r.left() || !r.view(len, b.stored)) {
      return corrupt("is malformed");
    }
  }
  if (r.left() != 0) return corrupt("has trailing bytes");
  return out;
}

}  // namespace ccpool::cache
