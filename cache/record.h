// On-disk values of the store tables and the packed-entry wire format.
// Layouts are documented byte by byte in docs/store-format.md.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/hash.h"
#include "cache/store.h"

namespace ccpool::cache {

// Version 2 ends with an XXH3-128 of every byte before it; version 1 had no
// checksum and is refused (a miss: the entry is evicted and rebuilt).
inline constexpr uint8_t kRecordVersion = 2;
inline constexpr size_t kRecordChecksumSize = 16;
inline constexpr uint32_t kPackedVersion = 1;

// A body reference; size 0 means "no body" (empty stdout, empty output file).
struct BodyRef {
  uint64_t size = 0;
  Digest digest;
};

struct RecordOutput {
  std::string name;
  uint32_t mode = 0644;
  BodyRef body;
};

// records table value: everything of an Entry except usage and body bytes.
struct Record {
  EntryKind kind = EntryKind::kCompile;
  int64_t created_ms = 0;
  uint64_t time_saved_ms = 0;
  int64_t expires_ms = 0;
  int32_t exit_code = 0;
  std::string tool, cwd, label;
  std::vector<std::string> argv, inputs;
  BodyRef stdout_body, stderr_body;
  std::vector<RecordOutput> outputs;

  uint64_t logical_bytes() const;
  std::vector<BodyRef> bodies() const;  // every non-empty ref, in record order
};

std::string encode_record(const Record& record);
Result<Record> decode_record(std::string_view bytes);

// usage table value: i64 last_used_ms | u64 hits.
struct Usage {
  int64_t last_used_ms = 0;
  uint64_t hits = 0;
};
std::string encode_usage(const Usage& usage);
Usage decode_usage(std::string_view bytes);  // zeros when malformed

// lru table key: u64 big-endian last_used_ms | 16-byte entry key, so a cursor walks oldest first.
std::string lru_key(int64_t last_used_ms, const Digest& key);
Digest entry_of_lru_key(std::string_view lru);

// meta "counters" value: nine u64 in this order.
struct Counters {
  uint64_t hits = 0, misses = 0, time_saved_ms = 0, evictions = 0, corrupt_evictions = 0;
  uint64_t entries = 0, logical_bytes = 0, stored_bytes = 0, bodies = 0;
};
std::string encode_counters(const Counters& c);
Counters decode_counters(std::string_view bytes);

// meta "events" value: u32 version (1) | u32 count | count x (u32 len | name | u64 n).
std::string encode_events(const std::map<std::string, uint64_t>& events);
std::map<std::string, uint64_t> decode_events(std::string_view bytes);  // empty when malformed
// Adds `delta` into `total`, keeping at most kMaxEvents names (the rest go to "other").
void merge_events(std::map<std::string, uint64_t>& total,
                  const std::map<std::string, uint64_t>& delta);

// Packed entry: "CCPE" | u32 version | u32 record_len | record | u32 body_count |
// body_count x (digest16 | u64 len | stored body) | XXH3-128 of everything before it.
struct PackedBody {
  Digest digest;
  std::string_view stored;
};
std::string pack_entry(std::string_view record, const std::vector<PackedBody>& bodies);
struct UnpackedEntry {
  std::string_view record;
  std::vector<PackedBody> bodies;  // views into the packed bytes
};
// Checks magic, version, lengths and the trailing checksum; no body decoding.
Result<UnpackedEntry> unpack_entry(std::string_view packed);

}  // namespace ccpool::cache
