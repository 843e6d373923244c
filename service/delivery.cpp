#include "service/delivery.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/fs.h"
#include "base/process.h"

namespace ccpool::service {
namespace {

constexpr int kMaxSymlinkHops = 40;  // the kernel's own limit (ELOOP)

// The path a write through `path` lands on: symlinks followed to their final
// target (which may not exist yet).
Result<std::string> final_target(std::string path) {
  for (int hop = 0; hop < kMaxSymlinkHops; ++hop) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return path;
    char buf[4096];
    ssize_t n = ::readlink(path.c_str(), buf, sizeof(buf));
    if (n <= 0 || n == static_cast<ssize_t>(sizeof(buf))) {
      return make_error(ErrorCode::kIo,
                        "cannot read the symlink '" + path + "': " + std::strerror(errno));
    }
    std::string target(buf, static_cast<size_t>(n));
    if (target[0] != '/') {
      size_t slash = path.rfind('/');
      target = (slash == std::string::npos ? std::string() : path.substr(0, slash + 1)) + target;
    }
    path = std::move(target);
  }
  return make_error(ErrorCode::kIo, "too many levels of symlinks at '" + path + "'");
}

// An existing device or FIFO: the tool would open it O_WRONLY and write.
Result<void> write_in_place(const std::string& path, std::string_view bytes) {
  // O_NONBLOCK only for the open: a FIFO nobody reads fails (ENXIO) instead
  // of parking a pool thread; the writes themselves block like the tool's.
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (!fd) return make_error(ErrorCode::kIo, "cannot open '" + path + "': " + std::strerror(errno));
  int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags >= 0) ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  return write_all(fd.get(), bytes);
}

bool holds_bytes(const std::string& path, const struct stat& st, std::string_view bytes) {
  if (static_cast<uint64_t>(st.st_size) != bytes.size()) return false;
  auto existing = read_file(path);
  return existing && *existing == bytes;
}

}  // namespace

Result<void> write_output(const std::string& path, std::string_view bytes, uint32_t mode) {
  CCPOOL_TRY_ASSIGN(std::string target, final_target(path));
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode)) {
      if (S_ISDIR(st.st_mode)) {
        return make_error(ErrorCode::kIo, "cannot write '" + path + "': it is a directory");
      }
      return write_in_place(target, bytes);
    }
    if (holds_bytes(target, st, bytes)) {
      if (::chmod(target.c_str(), mode) != 0 ||
          ::utimensat(AT_FDCWD, target.c_str(), nullptr, 0) != 0) {
        return make_error(ErrorCode::kIo,
                          "cannot update '" + target + "': " + std::strerror(errno));
      }
      return ok();
    }
  }
  return write_file_atomic(target, bytes, mode);
}

uint32_t delivered_mode(uint32_t stored_mode, uint32_t umask) {
  uint32_t base = (stored_mode & 0111) ? 0777 : 0666;
  return base & ~umask & 0777;
}

uint64_t fairness_id(int32_t rank, pid_t client_pid) {
  if (rank >= 0) return static_cast<uint64_t>(rank) + 1;
  pid_t ppid = parent_pid(client_pid);
  if (ppid > 0) return (1ull << 32) | static_cast<uint64_t>(ppid);
  return (2ull << 32) | static_cast<uint64_t>(client_pid);
}

std::string summarize_argv(const std::vector<std::string>& argv, size_t max_chars) {
  std::string out;
  for (const auto& arg : argv) {
    if (!out.empty()) out += ' ';
    out += arg;
    if (out.size() > max_chars) {
      out.resize(max_chars);
      out += "...";
      break;
    }
  }
  return out;
}

}  // namespace ccpool::service
