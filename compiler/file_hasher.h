// Content hashes of files, memoized by what stat(2) says about them:
// (dev, ino, size, mtime_ns, ctime_ns). ctime is in the memo key because
// mtime can be set back by `touch -d`/`cp -p`; ctime cannot.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "base/error.h"
#include "base/hash.h"
#include "base/thread_annotations.h"

namespace ccpool::compiler {

struct FileStat {
  uint64_t dev = 0, ino = 0, size = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;
  uint32_t mode = 0;
  bool operator==(const FileStat&) const = default;
};

// The fields of a stat(2) answer that identify a file's version.
FileStat file_stat(const struct stat& st);

// stat(2) following symlinks; nullopt when the path does not exist (or is
// unreachable: ENOTDIR, ELOOP...).
std::optional<FileStat> stat_path(const std::string& path);

struct HashedFile {
  Digest content;
  FileStat stat;
};

// The content digest of the file open as `fd` (read from its current offset
// to the end; the same digest as FileHasher's), never memoized. `path` names
// it in errors.
Result<Digest> hash_descriptor(int fd, const std::string& path);

class FileHasher {
 public:
  // Hashes a regular file's content (memoized). kNotFound when missing,
  // kUnsupported when not a regular file.
  Result<HashedFile> hash(const std::string& path);
  // The same, given what stat(2) just said about `path` (a caller that
  // lstat'ed a path that is not a link has its stat already).
  Result<HashedFile> hash(const std::string& path, const FileStat& now);

  // Memo size bound: the table is cleared when it reaches this many entries.
  static constexpr size_t kMaxEntries = 200000;

 private:
  struct Key {
    FileStat stat;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const noexcept;
  };
  Mutex m_mutex;
  std::unordered_map<Key, Digest, KeyHash> m_memo GUARDED_BY(m_mutex);
};

}  // namespace ccpool::compiler
