// Export/import archives (docs/store-format.md):
//   "CCPOOLAR" | u32 archive_version | u32 schema_version
//   per entry: u8 0x01 | key (16) | u64 packed_len | packed entry (record.h)
//   end:       u8 0xFF | u64 entry_count | XXH3-128 of every byte before this digest
// Import reads the file twice: pass 1 validates everything (structure, every
// body checksum, the trailer), pass 2 writes. A bad archive writes nothing.
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "cache/bytes.h"
#include "cache/store_impl.h"

namespace ccpool::cache {
namespace {

constexpr std::string_view kArchiveMagic = "CCPOOLAR";
constexpr uint32_t kArchiveVersion = 1;
constexpr uint8_t kTagEntry = 0x01;
constexpr uint8_t kTagEnd = 0xFF;
constexpr uint64_t kMaxPacked = 4ull << 30;
constexpr size_t kImportBatchEntries = 64;
constexpr uint64_t kImportBatchBytes = 64ull << 20;

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<FILE, FileCloser>;

// Reads exactly n bytes into the hasher as well; false on EOF or error.
bool read_exact(FILE* f, Hasher& hasher, void* out, size_t n) {
  if (n && std::fread(out, 1, n, f) != n) return false;
  hasher.update(std::string_view(static_cast<const char*>(out), n));
  return true;
}

Result<void> write_hashed(FILE* f, Hasher& hasher, std::string_view bytes, const std::string& path) {
  hasher.update(bytes);
  if (std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) {
    return make_error(errno == ENOSPC ? ErrorCode::kFull : ErrorCode::kIo,
                      "cannot write '" + path + "': " + std::strerror(errno) + "; free space or pick another path");
  }
  return ok();
}

// Streams the entries of an archive to `visit`; checks header, framing and trailer.
Result<uint64_t> read_archive(const std::string& path, const std::function<Result<void>(const Digest&, std::string_view, uint64_t)>& visit) {
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) {
    return make_error(errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo,
                      "cannot open archive '" + path + "': " + std::strerror(errno));
  }
  Hasher hasher;
  char magic[8];
  uint32_t version = 0, schema = 0;
  if (!read_exact(f.get(), hasher, magic, 8) || std::string_view(magic, 8) != kArchiveMagic) {
    return make_error(ErrorCode::kUnsupported,
                      "'" + path + "' is not a ccpool archive (no CCPOOLAR header); create one with 'ccpool cache export'");
  }
  if (!read_exact(f.get(), hasher, &version, 4) || !read_exact(f.get(), hasher, &schema, 4)) {
    return make_error(ErrorCode::kCorruption, "archive '" + path + "' is truncated (in its header); export it again");
  }
  if (version > kArchiveVersion || schema > kSchemaVersion) {
    return make_error(ErrorCode::kUnsupported, "archive '" + path + "' is format " + std::to_string(version) +
                                                   "/schema " + std::to_string(schema) +
                                                   ", newer than this ccpool reads (" +
                                                   std::to_string(kArchiveVersion) + "/" +
                                                   std::to_string(kSchemaVersion) + "); upgrade ccpool");
  }
  auto truncated = [&](uint64_t n) {
    return make_error(ErrorCode::kCorruption, "archive '" + path + "' is truncated or damaged after " +
                                                  std::to_string(n) + " entries; export it again");
  };
  std::string packed;
  for (uint64_t n = 0;; ++n) {
    uint8_t tag = 0;
    if (!read_exact(f.get(), hasher, &tag, 1)) return truncated(n);
    if (tag == kTagEnd) {
      uint64_t count = 0;
      Digest expected, trailer;
      if (!read_exact(f.get(), hasher, &count, 8)) return truncated(n);
      expected = hasher.digest();
      if (std::fread(trailer.bytes.data(), 1, 16, f.get()) != 16) return truncated(n);
      char extra;
      if (count != n || trailer != expected || std::fread(&extra, 1, 1, f.get()) != 0) {
        return make_error(ErrorCode::kCorruption, "archive '" + path + "' fails its checksum; export it again");
      }
      return n;
    }
    Digest key;
    uint64_t len = 0;
    if (tag != kTagEntry || !read_exact(f.get(), hasher, key.bytes.data(), 16) ||
        !read_exact(f.get(), hasher, &len, 8) || len > kMaxPacked) {
      return truncated(n);
    }
    packed.resize(len);
    if (!read_exact(f.get(), hasher, packed.data(), len)) return truncated(n);
    CCPOOL_TRY(visit(key, packed, n));
  }
}

}  // namespace

Result<ArchiveResult> Store::export_to(const std::string& path, const ProgressFn& progress) {
  flush();
  std::string tmp = path + ".tmp";
  File f(std::fopen(tmp.c_str(), "wb"));
  if (!f) {
    return make_error(ErrorCode::kIo, "cannot create '" + tmp + "': " + std::strerror(errno) +
                                          "; pick a writable path");
  }
  ArchiveResult result;
  Hasher hasher;
  auto written = m_impl->run_read<uint64_t>([&](lmdb::Txn& txn) -> Result<uint64_t> {
    ByteWriter header;
    header.bytes(kArchiveMagic);
    header.u32(kArchiveVersion);
    header.u32(kSchemaVersion);
    CCPOOL_TRY(write_hashed(f.get(), hasher, header.out(), path));
    uint64_t total = txn.count(lmdb::Table::kRecords), done = 0;
    std::vector<Digest> keys;
    txn.scan(lmdb::Table::kRecords, "", [&](std::string_view k, std::string_view) {
      keys.push_back(digest_of(k));
      return true;
    });
    for (const Digest& key : keys) {
      auto packed = m_impl->pack(txn, key, true);
      if (!packed) {
        spdlog::warn("cache: export skips corrupt entry {}: {}", key.hex(), packed.error().message);
        ++result.skipped;
      } else if (*packed) {
        ByteWriter w;
        w.u8(kTagEntry);
        w.digest(key);
        w.u64((*packed)->size());
        CCPOOL_TRY(write_hashed(f.get(), hasher, w.out(), path));
        CCPOOL_TRY(write_hashed(f.get(), hasher, **packed, path));
        ++result.entries;
        result.bytes += (*packed)->size();
      }
      if (progress) progress(++done, total);
    }
    ByteWriter end;
    end.u8(kTagEnd);
    end.u64(result.entries);
    CCPOOL_TRY(write_hashed(f.get(), hasher, end.out(), path));
    Digest sum = hasher.digest();
    CCPOOL_TRY(write_hashed(f.get(), hasher, key_view(sum), path));
    return result.entries;
  });
  bool closed = std::fclose(f.release()) == 0;
  if (!written || !closed || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    if (!written) return tl::unexpected(written.error());
    return make_error(ErrorCode::kIo, "cannot write '" + path + "': " + std::strerror(errno));
  }
  return result;
}

Result<ArchiveResult> Store::import_from(const std::string& path, const ProgressFn& progress) {
  // Pass 1: validate everything; nothing is written.
  CCPOOL_TRY_ASSIGN(uint64_t total, read_archive(path, [&](const Digest& key, std::string_view packed, uint64_t n) -> Result<void> {
    auto p = m_impl->prepare_packed(key, packed, true);
    if (!p && p.error().code != ErrorCode::kFull) {
      return make_error(p.error().code, "archive '" + path + "' entry " + std::to_string(n + 1) + " (" +
                                            key.hex() + ") is invalid: " + p.error().message + "; export it again");
    }
    if (progress) progress(n + 1, 0);
    return ok();
  }));
  // Pass 2: write in batches, skipping keys already present.
  ArchiveResult result;
  std::vector<PreparedEntry> batch;
  uint64_t batch_bytes = 0;
  auto write_batch = [&]() -> Result<void> {
    if (batch.empty()) return ok();
    CCPOOL_TRY_ASSIGN(uint64_t skipped, m_impl->write_entries(batch, true));
    result.skipped += skipped;
    result.entries += batch.size() - skipped;
    batch.clear();
    batch_bytes = 0;
    return ok();
  };
  CCPOOL_TRY(read_archive(path, [&](const Digest& key, std::string_view packed, uint64_t n) -> Result<void> {
    auto p = m_impl->prepare_packed(key, packed, false);
    if (!p) {  // larger than max_size: cannot be kept here
      ++result.skipped;
      return ok();
    }
    result.bytes += packed.size();
    batch_bytes += p->stored_size();
    batch.push_back(std::move(*p));
    if (batch.size() >= kImportBatchEntries || batch_bytes >= kImportBatchBytes) CCPOOL_TRY(write_batch());
    if (progress) progress(n + 1, total);
    return ok();
  }));
  CCPOOL_TRY(write_batch());
  return result;
}

}  // namespace ccpool::cache
