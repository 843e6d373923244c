#include "cache/archive_reader.h"

#include <algorithm>

#include "cache/store.h"

namespace ccpool::cache {
namespace {

// Entries are read in slices of this size; the buffer grows by at most one
// slice beyond the bytes the file really holds.
constexpr size_t kReadSlice = 1u << 20;

// Reads exactly n bytes into the hasher as well; false on EOF or error.
bool read_exact(std::FILE* f, Hasher& hasher, void* out, size_t n) {
  if (n && std::fread(out, 1, n, f) != n) return false;
  hasher.update(std::string_view(static_cast<const char*>(out), n));
  return true;
}

// Reads `len` bytes slice by slice, hashing them; keeps them in *keep when
// non-null. False when the file ends first.
bool read_entry(std::FILE* f, Hasher& hasher, uint64_t len, std::string* keep) {
  std::string scratch;
  if (keep) keep->clear();
  while (len > 0) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(len, kReadSlice));
    std::string& buf = keep ? *keep : scratch;
    size_t base = keep ? buf.size() : 0;
    buf.resize(base + n);
    if (!read_exact(f, hasher, buf.data() + base, n)) return false;
    len -= n;
  }
  return true;
}

}  // namespace

Result<uint64_t> read_archive(std::FILE* file, const std::string& path, uint64_t max_packed,
                              const ArchiveVisitor& visit) {
  Hasher hasher;
  char magic[8];
  uint32_t version = 0, schema = 0;
  if (!read_exact(file, hasher, magic, 8) || std::string_view(magic, 8) != kArchiveMagic) {
    return make_error(ErrorCode::kUnsupported,
                      "'" + path +
                          "' is not a ccpool archive (no CCPOOLAR header); create one with 'ccpool "
                          "cache export'");
  }
  if (!read_exact(file, hasher, &version, 4) || !read_exact(file, hasher, &schema, 4)) {
    return make_error(ErrorCode::kCorruption,
                      "archive '" + path + "' is truncated (in its header); export it again");
  }
  if (version > kArchiveVersion || schema > kSchemaVersion) {
    return make_error(ErrorCode::kUnsupported,
                      "archive '" + path + "' is format " + std::to_string(version) + "/schema " +
                          std::to_string(schema) + ", newer than this ccpool reads (" +
                          std::to_string(kArchiveVersion) + "/" + std::to_string(kSchemaVersion) +
                          "); upgrade ccpool");
  }
  auto truncated = [&](uint64_t n) {
    return make_error(ErrorCode::kCorruption, "archive '" + path +
                                                  "' is truncated or damaged after " +
                                                  std::to_string(n) + " entries; export it again");
  };
  std::string packed;
  for (uint64_t n = 0;; ++n) {
    uint8_t tag = 0;
    if (!read_exact(file, hasher, &tag, 1)) return truncated(n);
    if (tag == kArchiveTagEnd) {
      uint64_t count = 0;
      Digest expected, trailer;
      if (!read_exact(file, hasher, &count, 8)) return truncated(n);
      expected = hasher.digest();
      if (std::fread(trailer.bytes.data(), 1, 16, file) != 16) return truncated(n);
      char extra;
      if (count != n || trailer != expected || std::fread(&extra, 1, 1, file) != 0) {
        return make_error(ErrorCode::kCorruption,
                          "archive '" + path + "' fails its checksum; export it again");
      }
      return n;
    }
    Digest key;
    uint64_t len = 0;
    if (tag != kArchiveTagEntry || !read_exact(file, hasher, key.bytes.data(), 16) ||
        !read_exact(file, hasher, &len, 8)) {
      return truncated(n);
    }
    bool keep = len <= max_packed;
    if (!read_entry(file, hasher, len, keep ? &packed : nullptr)) return truncated(n);
    std::optional<std::string_view> view;
    if (keep) view = std::string_view(packed);
    CCPOOL_TRY(visit(key, view, n));
  }
}

}  // namespace ccpool::cache
