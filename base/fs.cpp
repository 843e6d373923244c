#include "base/fs.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>

namespace ccpool {

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) reset(other.release());
  return *this;
}

int UniqueFd::release() {
  int fd = m_fd;
  m_fd = -1;
  return fd;
}

void UniqueFd::reset(int fd) {
  if (m_fd >= 0) ::close(m_fd);
  m_fd = fd;
}

namespace {
// Reads `path` from its start up to `max_bytes` (the whole file when smaller).
Result<std::string> read_up_to(const std::string& path, size_t max_bytes) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    return make_error(errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo,
                      "cannot open '" + path + "': " + errno_text(errno));
  }
  std::string out;
  struct stat st;
  if (::fstat(fd.get(), &st) == 0 && st.st_size > 0) {
    out.reserve(std::min(static_cast<size_t>(st.st_size), max_bytes));
  }
  char buf[64 * 1024];
  while (out.size() < max_bytes) {
    ssize_t n = ::read(fd.get(), buf, std::min(sizeof buf, max_bytes - out.size()));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      return make_error(ErrorCode::kIo, "cannot read '" + path + "': " + errno_text(errno));
    }
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}
}  // namespace

Result<std::string> read_file(const std::string& path) {
  return read_up_to(path, std::numeric_limits<size_t>::max());
}

Result<std::string> read_file_head(const std::string& path, size_t max_bytes) {
  return read_up_to(path, max_bytes);
}

Result<void> write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return make_error(errno == ENOSPC ? ErrorCode::kFull : ErrorCode::kIo,
                        std::string("write failed: ") + errno_text(errno));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return ok();
}

Result<void> write_file_atomic(const std::string& path, std::string_view data, mode_t mode) {
  // Unique per process (pid) and per call (counter); O_EXCL catches the rest.
  static std::atomic<uint64_t> counter{0};
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(++counter);
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd) {
    return make_error(errno == ENOSPC ? ErrorCode::kFull : ErrorCode::kIo,
                      "cannot create '" + tmp + "': " + errno_text(errno));
  }
  auto written = write_all(fd.get(), data);
  if (!written) {
    ::unlink(tmp.c_str());
    return make_error(written.error().code,
                      "cannot write '" + path + "': " + written.error().message);
  }
  if (::fchmod(fd.get(), mode) != 0 || ::close(fd.release()) != 0 ||
      ::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return make_error(err == ENOSPC ? ErrorCode::kFull : ErrorCode::kIo,
                      "cannot write '" + path + "': " + errno_text(err));
  }
  return ok();
}

Result<std::string> read_secret_file(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return make_error(errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo,
                      "cannot read '" + path + "': " + errno_text(errno));
  }
  if (st.st_mode & 077) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%03o", static_cast<unsigned>(st.st_mode & 0777));
    return make_error(ErrorCode::kPermission, "'" + path + "' holds a secret but is mode " + mode +
                                                  "; run 'chmod 600 " + path + "'");
  }
  return read_file(path);
}

Result<void> ensure_private_dir(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    return make_error(errno == EACCES ? ErrorCode::kPermission : ErrorCode::kIo,
                      "cannot create directory '" + path + "': " + errno_text(errno) +
                          "; choose a directory you can write");
  }
  return check_private_dir(path);
}

namespace {

std::string mode_text(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%03o", static_cast<unsigned>(mode & 0777));
  return text;
}

// Every ancestor of `path` (resolved): one that others may write without the
// sticky bit lets them rename `path` away and put their own in its place.
Result<void> check_ancestors(const std::string& path) {
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) == nullptr) {
    return make_error(ErrorCode::kIo, "cannot resolve '" + path + "': " + errno_text(errno));
  }
  std::string dir(resolved);
  while (dir.size() > 1) {
    dir.resize(std::max<size_t>(dir.rfind('/'), 1));
    struct stat st;
    if (::stat(dir.c_str(), &st) != 0) {
      return make_error(ErrorCode::kIo, "cannot stat '" + dir + "': " + errno_text(errno));
    }
    if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX)) {
      return make_error(ErrorCode::kPermission,
                        "'" + dir + "' (a parent of '" + path +
                            "') is writable by every user (mode " + mode_text(st.st_mode) +
                            ", no sticky bit), so another user could replace '" + path +
                            "'; run 'chmod o-w " + dir + "' or choose a directory elsewhere");
    }
  }
  return ok();
}

}  // namespace

Result<void> check_private_dir(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    return make_error(errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo,
                      "cannot stat '" + path + "': " + errno_text(errno));
  }
  if (!S_ISDIR(st.st_mode)) {
    return make_error(
        ErrorCode::kInvalidArgument,
        "'" + path + "' exists and is not a directory; remove it or pick another path");
  }
  if (st.st_uid != ::geteuid()) {
    return make_error(ErrorCode::kPermission, "'" + path + "' is owned by uid " +
                                                  std::to_string(st.st_uid) + ", not by you (uid " +
                                                  std::to_string(::geteuid()) +
                                                  "); use a directory of your own");
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    return make_error(ErrorCode::kPermission, "'" + path + "' is writable by others (mode " +
                                                  mode_text(st.st_mode) + "); run 'chmod 700 " +
                                                  path + "'");
  }
  return check_ancestors(path);
}

const char* network_filesystem_name(int64_t magic) {
  switch (static_cast<uint32_t>(magic)) {
    case NFS_SUPER_MAGIC:
      return "NFS";
    case 0xFF534D42:
      return "CIFS";  // CIFS_MAGIC_NUMBER
    case SMB_SUPER_MAGIC:
      return "SMB";
    case 0xFE534D42:
      return "SMB2";
    case 0x0BD00BD0:
      return "Lustre";
    case 0x47504653:
      return "GPFS";
    case V9FS_MAGIC:
      return "9p";
    case CODA_SUPER_MAGIC:
      return "Coda";
    case AFS_SUPER_MAGIC:
      return "AFS";
    case 0x6B414653:
      return "AFS";  // kAFS
    case 0x564C:
      return "NCP";
    case 0x013111A8:
      return "IBRIX";
    case 0x19830326:
      return "BeeGFS";
    case 0x00C36400:
      return "CephFS";
    case 0xAAD7AAEA:
      return "PanFS";
    default:
      return nullptr;
  }
}

Result<void> check_local_filesystem(const std::string& path, const std::string& what,
                                    const StatfsTypeFn& statfs_type) {
  int64_t magic;
  if (statfs_type) {
    CCPOOL_TRY_ASSIGN(magic, statfs_type(path));
  } else {
    struct statfs sfs;
    if (::statfs(path.c_str(), &sfs) != 0) {
      return make_error(ErrorCode::kIo, "cannot statfs '" + path + "': " + errno_text(errno));
    }
    magic = static_cast<int64_t>(sfs.f_type);
  }
  if (const char* name = network_filesystem_name(magic)) {
    return make_error(ErrorCode::kUnsupported, "'" + path + "' is on a network filesystem (" +
                                                   name + "); LMDB needs a node-local disk: set " +
                                                   what + " to a local path, e.g. " + what +
                                                   "=/tmp/ccpool-$USER");
  }
  return ok();
}

void remove_tree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

Result<std::string> make_temp_dir(const std::string& parent, const std::string& prefix) {
  std::string templ = parent + "/" + prefix + "XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr) {
    return make_error(errno == ENOSPC ? ErrorCode::kFull : ErrorCode::kIo,
                      "cannot create a temp dir under '" + parent + "': " + errno_text(errno));
  }
  return templ;
}

bool path_exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

}  // namespace ccpool
