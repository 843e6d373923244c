#include "compiler/file_hasher.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "compiler/bounded.h"

namespace ccpool::compiler {
namespace {
constexpr int64_t kRacyNs = 2'000'000'000;
}  // namespace

FileStat file_stat(const struct stat& st) {
  FileStat out;
  out.dev = st.st_dev;
  out.ino = st.st_ino;
  out.size = static_cast<uint64_t>(st.st_size);
  out.mtime_ns = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
  out.ctime_ns = int64_t{st.st_ctim.tv_sec} * 1000000000 + st.st_ctim.tv_nsec;
  out.mode = st.st_mode;
  return out;
}

std::optional<FileStat> stat_path(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return file_stat(st);
}

Result<Digest> hash_descriptor(int fd, const std::string& path) {
  Hasher hasher;
  char buf[64 * 1024];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) return hasher.digest();
    if (n < 0) {
      if (errno == EINTR) continue;
      return make_error(ErrorCode::kIo, "cannot read '" + path + "': " + std::strerror(errno));
    }
    hasher.update(std::string_view(buf, static_cast<size_t>(n)));
  }
}

size_t FileHasher::KeyHash::operator()(const Key& k) const noexcept {
  uint64_t h = k.stat.ino * 0x9e3779b97f4a7c15ULL;
  h ^= k.stat.dev + (h << 6) + (h >> 2);
  h ^= static_cast<uint64_t>(k.stat.mtime_ns) + (h << 6) + (h >> 2);
  h ^= static_cast<uint64_t>(k.stat.ctime_ns) + (h << 6) + (h >> 2);
  h ^= k.stat.size + (h << 6) + (h >> 2);
  return static_cast<size_t>(h);
}

Result<HashedFile> FileHasher::hash(const std::string& path) {
  std::optional<FileStat> before = stat_path(path);
  if (!before) return make_error(ErrorCode::kNotFound, "'" + path + "' does not exist");
  return hash(path, *before);
}

Result<HashedFile> FileHasher::hash(const std::string& path, const FileStat& now) {
  std::optional<FileStat> before = now;
  if (!S_ISREG(before->mode)) {
    return make_error(ErrorCode::kUnsupported, "'" + path + "' is not a regular file");
  }
  Key key{*before};
  key.stat.mode = 0;
  {
    MutexLock lock(&m_mutex);
    auto it = m_memo.find(key);
    if (it != m_memo.end()) return HashedFile{it->second, *before};
  }
  if (before->size > kBoundedReadBytes && bounded::decline()) {
    return make_error(ErrorCode::kUnsupported,
                      "'" + path + "' is too large to read on a thread that must not wait");
  }
  CCPOOL_TRY_ASSIGN(Digest digest, hash_file(path));
  // A file rewritten while we read it must not be memoized under the old
  // stat: compare again and only remember a stable reading.
  std::optional<FileStat> after = stat_path(path);
  if (!after || !(*after == *before)) {
    return make_error(ErrorCode::kIo, "'" + path + "' changed while being hashed");
  }
  // Racy-git rule: file timestamps have jiffy granularity, so a file written
  // twice within one tick keeps its stat. Only remember files whose mtime and
  // ctime are safely in the past.
  int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  if (before->mtime_ns > now_ns - kRacyNs || before->ctime_ns > now_ns - kRacyNs) {
    return HashedFile{digest, *before};
  }
  MutexLock lock(&m_mutex);
  if (m_memo.size() >= kMaxEntries) m_memo.clear();
  m_memo.emplace(key, digest);
  return HashedFile{digest, *before};
}

}  // namespace ccpool::compiler
