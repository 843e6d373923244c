// Hand-built store values for the decoder tests: packed entries and archives
// whose headers say whatever the test wants, written with the store's own
// encoders (cache/record.h) so only the field under test is wrong.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "cache/bytes.h"
#include "cache/codec.h"
#include "cache/record.h"

namespace ccpool::cache::testing {

// A stored body ("u8 codec | u64 raw_size | payload") for `data`, compressed,
// with its raw_size field then set to `declared`.
inline std::string body_declaring(const std::string& data, uint64_t declared) {
  Codec codec(1);
  std::string stored = codec.encode(data);
  std::memcpy(stored.data() + 1, &declared, 8);
  return stored;
}

// A packed entry with one output whose record and body header both claim
// `declared` raw bytes while the body really holds `data`.
inline std::string packed_declaring(const std::string& data, uint64_t declared) {
  Record rec;
  rec.tool = "cc";
  rec.outputs.push_back({"k.o", 0644, BodyRef{declared, hash_bytes(data)}});
  std::string stored = body_declaring(data, declared);
  return pack_entry(encode_record(rec), {PackedBody{hash_bytes(data), stored}});
}

struct ArchiveItem {
  Digest key;
  std::string packed;
  uint64_t declared_len = UINT64_MAX;  // UINT64_MAX: the real length
};

// An archive in the export layout; `end` false leaves off the end marker and
// trailer (a truncated file).
inline std::string archive_of(const std::vector<ArchiveItem>& items, bool end = true) {
  ByteWriter w;
  w.bytes("CCPOOLAR");
  w.u32(1);
  w.u32(kSchemaVersion);
  for (const ArchiveItem& item : items) {
    w.u8(0x01);
    w.digest(item.key);
    w.u64(item.declared_len == UINT64_MAX ? item.packed.size() : item.declared_len);
    w.bytes(item.packed);
  }
  if (end) {
    w.u8(0xFF);
    w.u64(items.size());
    Digest sum = hash_bytes(w.out());
    w.digest(sum);
  }
  return std::move(w.out());
}

}  // namespace ccpool::cache::testing
