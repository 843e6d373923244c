// Reader of export/import archives (docs/store-format.md), private to cache/
// and its fuzz target:
//   "CCPOOLAR" | u32 archive_version | u32 schema_version
//   per entry: u8 0x01 | key (16) | u64 packed_len | packed entry (record.h)
//   end:       u8 0xFF | u64 entry_count | XXH3-128 of every byte before this digest
// No declared length is trusted: an entry is read in slices into a buffer
// that grows only as bytes really arrive, so a file costs at most its own
// size in memory whatever its headers claim.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"
#include "base/hash.h"

namespace ccpool::cache {

inline constexpr std::string_view kArchiveMagic = "CCPOOLAR";
inline constexpr uint32_t kArchiveVersion = 1;
inline constexpr uint8_t kArchiveTagEntry = 0x01;
inline constexpr uint8_t kArchiveTagEnd = 0xFF;

// `packed` is nullopt for an entry longer than max_packed: its bytes were
// hashed (the trailer still covers them) but not kept.
using ArchiveVisitor = std::function<Result<void>(
    const Digest& key, std::optional<std::string_view> packed, uint64_t index)>;

// Streams the entries of the archive in `file` (named `path` in messages) to
// `visit`; checks the header, the framing and the trailer. Returns the number
// of entries. A visitor error stops the read and is returned as is.
Result<uint64_t> read_archive(std::FILE* file, const std::string& path, uint64_t max_packed,
                              const ArchiveVisitor& visit);

}  // namespace ccpool::cache
