#include "base/unix_socket.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ccpool {
namespace {

// True when something accepts connections on `path` right now. A full backlog
// (EAGAIN on a nonblocking connect) also means someone listens.
Result<bool> someone_listens(const sockaddr_un& addr, const std::string& path) {
  UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!probe) return make_error(ErrorCode::kIo, "socket() failed: " + errno_text(errno));
  for (;;) {
    if (::connect(probe.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0)
      return true;
    int err = errno;
    if (err == EINTR) continue;
    if (err == EAGAIN) return true;
    if (err == ECONNREFUSED || err == ENOENT) return false;
    return make_error(err == EACCES ? ErrorCode::kPermission : ErrorCode::kIo,
                      "cannot probe '" + path + "': " + errno_text(err));
  }
}

}  // namespace

Result<sockaddr_un> unix_address(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return make_error(
        ErrorCode::kInvalidArgument,
        "socket path '" + path + "' is empty or longer than " +
            std::to_string(sizeof(addr.sun_path) - 1) +
            " bytes; use a shorter state dir: choose a shorter --socket or CCPOOL_SOCKET");
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

Result<UniqueFd> listen_unix(const std::string& path, ino_t* inode) {
  CCPOOL_TRY_ASSIGN(sockaddr_un addr, unix_address(path));
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return make_error(
          ErrorCode::kInvalidArgument,
          "'" + path + "' exists and is not a socket; remove it or choose another --socket");
    }
    // A socket file nobody accepts on is left over from a crash: reuse the path.
    CCPOOL_TRY_ASSIGN(bool live, someone_listens(addr, path));
    if (live) {
      return make_error(ErrorCode::kUnsupported,
                        "another process already serves '" + path +
                            "' (a second ccpool service?); stop it or choose another --socket");
    }
    ::unlink(path.c_str());
  }
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return make_error(ErrorCode::kIo, "socket() failed: " + errno_text(errno));
  // On Linux the socket file takes the socket inode's mode at bind(): set it
  // first so the file is never reachable by others, even briefly.
  ::fchmod(fd.get(), 0600);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    int err = errno;
    return make_error(err == EACCES ? ErrorCode::kPermission : ErrorCode::kIo,
                      "cannot bind '" + path + "': " + errno_text(err));
  }
  if (::chmod(path.c_str(), 0600) != 0 || ::lstat(path.c_str(), &st) != 0 ||
      ::listen(fd.get(), SOMAXCONN) != 0) {
    int err = errno;
    ::unlink(path.c_str());
    return make_error(ErrorCode::kIo, "cannot listen on '" + path + "': " + errno_text(err));
  }
  if (inode != nullptr) *inode = st.st_ino;
  return fd;
}

Result<PeerCred> peer_credentials(int fd) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return make_error(ErrorCode::kIo, "SO_PEERCRED failed: " + errno_text(errno));
  }
  return PeerCred{cred.pid, cred.uid, cred.gid};
}

Result<void> check_socket_dir(const std::string& socket_path) {
  size_t slash = socket_path.rfind('/');
  std::string dir = slash == std::string::npos ? "."
                    : slash == 0               ? "/"
                                               : socket_path.substr(0, slash);
  auto checked = check_private_dir(dir);
  if (checked || checked.error().code == ErrorCode::kNotFound) return ok();
  return make_error(
      ErrorCode::kPermission,
      "refusing to use the ccpool socket '" + socket_path + "': " + checked.error().message +
          ". Another user may have created that directory to receive your compiles; remove it "
          "(ccpool recreates it) or set CCPOOL_SOCKET or XDG_RUNTIME_DIR to a directory of your "
          "own");
}

Result<void> check_peer_is_self(int fd, const std::string& socket_path) {
  CCPOOL_TRY_ASSIGN(PeerCred peer, peer_credentials(fd));
  // SO_PEERCRED names whoever called listen(): under a system unit that is
  // systemd (root), which then hands the socket to the service it runs as
  // the user (User=). Root is trusted anyway; the directory check above
  // already ensures nobody else could have put a socket here.
  if (peer.uid == ::geteuid() || peer.uid == 0) return ok();
  return make_error(ErrorCode::kPermission,
                    "refusing the ccpool socket '" + socket_path +
                        "': the process listening on it (pid " + std::to_string(peer.pid) +
                        ") runs as uid " + std::to_string(peer.uid) + ", not as you (uid " +
                        std::to_string(::geteuid()) +
                        "); stop it or set CCPOOL_SOCKET to a socket in a directory of your own");
}

ssize_t send_with_fd(int fd, std::string_view data, int pass_fd, int flags) {
  iovec iov{const_cast<char*>(data.data()), data.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(cmsg), &pass_fd, sizeof(int));
  return ::sendmsg(fd, &msg, flags);
}

}  // namespace ccpool
