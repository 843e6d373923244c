// Small filesystem helpers shared by every layer. All return Result<> with
// messages that name the path.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>

#include "base/error.h"

namespace ccpool {

// Owns a file descriptor; closes it on destruction. Move-only.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : m_fd(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : m_fd(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return m_fd; }
  explicit operator bool() const { return m_fd >= 0; }
  int release();
  void reset(int fd = -1);

 private:
  int m_fd = -1;
};

Result<std::string> read_file(const std::string& path);
// The first `max_bytes` of `path` (all of it when shorter): a format's magic
// without reading a large file whole.
Result<std::string> read_file_head(const std::string& path, size_t max_bytes);

// read_file for a password or key: the file (after symlinks) must not be
// readable or writable by group or others (mode 0600 or stricter), else
// kPermission naming the path, its mode and the chmod that fixes it.
Result<std::string> read_secret_file(const std::string& path);

// Writes via a temp file in the same directory, fsync-free, then rename(2).
// A crash leaves either the old file or the new one, never a torn one.
Result<void> write_file_atomic(const std::string& path, std::string_view data, mode_t mode);

Result<void> write_all(int fd, std::string_view data);

// Creates `path` (and parents) with mode 0700 if missing, then checks it with
// check_private_dir.
Result<void> ensure_private_dir(const std::string& path);

// Checks that `path` may hold private state: a directory (not a symlink)
// owned by the effective uid, not writable by group or others, and no
// ancestor writable by every user without the sticky bit (such a parent lets
// another user rename `path` away and put their own in its place).
// kNotFound when it does not exist; kPermission names the directory and the fix.
Result<void> check_private_dir(const std::string& path);

// Network filesystems break LMDB's locking and mmap coherence. The statfs magic
// is read through a seam so tests can inject any filesystem type.
using StatfsTypeFn = std::function<Result<int64_t>(const std::string& path)>;
Result<void> check_local_filesystem(const std::string& path, const std::string& what,
                                    const StatfsTypeFn& statfs_type = {});
const char* network_filesystem_name(int64_t magic);  // nullptr when local

// Recursively removes a directory tree; missing is fine.
void remove_tree(const std::string& path);

// mkdtemp under `parent` with the given prefix.
Result<std::string> make_temp_dir(const std::string& parent, const std::string& prefix);

bool path_exists(const std::string& path);

}  // namespace ccpool
