// Export/import archives (layout: archive_reader.h, docs/store-format.md).
// Import reads the file twice: pass 1 validates everything (structure, every
// body checksum, the trailer), pass 2 checks every entry again as it writes
// it, so a file changed between the passes cannot bring in unchecked bytes.
// A bad archive writes nothing in pass 1.
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "cache/archive_reader.h"
#include "cache/bytes.h"
#include "cache/store_impl.h"

namespace ccpool::cache {
namespace {

constexpr size_t kImportBatchEntries = 64;
constexpr uint64_t kImportBatchBytes = 64ull << 20;

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<FILE, FileCloser>;

Result<void> write_hashed(FILE* f, Hasher& hasher, std::string_view bytes,
                          const std::string& path) {
  hasher.update(bytes);
  if (std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) {
    return make_error(errno == ENOSPC ? ErrorCode::kFull : ErrorCode::kIo,
                      "cannot write '" + path + "': " + std::strerror(errno) +
                          "; free space or pick another path");
  }
  return ok();
}

Result<uint64_t> read_archive_file(const std::string& path, uint64_t max_packed,
                                   const ArchiveVisitor& visit) {
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) {
    return make_error(errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo,
                      "cannot open archive '" + path + "': " + std::strerror(errno));
  }
  return read_archive(f.get(), path, max_packed, visit);
}

// A packed entry holds at least 33 bytes of framing and header per body of 9
// or more stored bytes, so one longer than this cannot fit in max_size.
uint64_t max_packed_for(uint64_t max_size) {
  constexpr uint64_t kSlack = 1ull << 20;
  return max_size > (UINT64_MAX - kSlack) / 4 ? UINT64_MAX : 4 * max_size + kSlack;
}

// The archive's temporary file, created as write_file_atomic creates its own:
// a name unique to this process and call, O_EXCL (a file already there is an
// error, never reused) and O_NOFOLLOW (a planted symlink is never followed),
// mode 0600 (the archive holds the store).
Result<File> create_temporary(const std::string& tmp) {
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    return make_error(errno == ENOSPC ? ErrorCode::kFull : ErrorCode::kIo,
                      "cannot create '" + tmp + "': " + std::strerror(errno) +
                          "; pick a path in a directory only you can write");
  }
  File f(::fdopen(fd, "wb"));
  if (!f) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return make_error(ErrorCode::kIo, "cannot open '" + tmp + "': " + std::strerror(errno));
  }
  return f;
}

}  // namespace

Result<ArchiveResult> Store::export_to(const std::string& path, const ProgressFn& progress) {
  flush();
  static std::atomic<uint64_t> counter{0};
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(++counter);
  CCPOOL_TRY_ASSIGN(File f, create_temporary(tmp));
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
        w.u8(kArchiveTagEntry);
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
    end.u8(kArchiveTagEnd);
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
  uint64_t max_packed = max_packed_for(m_impl->options.max_size);
  // Pass 1: validate everything; nothing is written.
  CCPOOL_TRY_ASSIGN(uint64_t total,
                    read_archive_file(path, max_packed,
                                      [&](const Digest& key, std::optional<std::string_view> packed,
                                          uint64_t n) -> Result<void> {
                                        if (packed) {
                                          auto p = m_impl->prepare_packed(key, *packed);
                                          if (!p && p.error().code != ErrorCode::kFull) {
                                            return make_error(
                                                p.error().code,
                                                "archive '" + path + "' entry " +
                                                    std::to_string(n + 1) + " (" + key.hex() +
                                                    ") is invalid: " + p.error().message +
                                                    "; export it again");
                                          }
                                        }
                                        if (progress) progress(n + 1, 0);
                                        return ok();
                                      }));
  // Pass 2: check each entry again and write in batches, skipping keys already present.
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
  CCPOOL_TRY(read_archive_file(
      path, max_packed,
      [&](const Digest& key, std::optional<std::string_view> packed, uint64_t n) -> Result<void> {
        auto p = packed ? m_impl->prepare_packed(key, *packed)
                        : make_error(ErrorCode::kFull,
                                     "entry " + key.hex() + " is larger than the store");
        if (!p &&
            p.error().code == ErrorCode::kFull) {  // larger than max_size: cannot be kept here
          ++result.skipped;
          return ok();
        }
        if (!p) {
          return make_error(
              p.error().code,
              "archive '" + path + "' changed while it was imported: entry " +
                  std::to_string(n + 1) + " (" + key.hex() + ") is now invalid: " +
                  p.error().message + "; the " + std::to_string(result.entries) +
                  " entries written before it are valid; import a copy nobody writes to");
        }
        result.bytes += packed->size();
        batch_bytes += p->stored_size();
        batch.push_back(std::move(*p));
        if (batch.size() >= kImportBatchEntries || batch_bytes >= kImportBatchBytes)
          CCPOOL_TRY(write_batch());
        if (progress) progress(n + 1, total);
        return ok();
      }));
  CCPOOL_TRY(write_batch());
  return result;
}

}  // namespace ccpool::cache
