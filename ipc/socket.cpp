// Unix-socket helpers. All waits go through poll() with the time left until
// the caller's deadline, so no call here blocks past it.
#include "ipc/socket.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <thread>

namespace ccpool::ipc {
namespace {

// Milliseconds until `deadline`, rounded up, clamped to [0, INT_MAX].
int poll_timeout(Deadline deadline) {
  auto left = deadline - std::chrono::steady_clock::now();
  if (left <= Deadline::duration::zero()) return 0;
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

// Waits for `events` on fd. kTimeout when the deadline passes first.
Result<void> wait_for(int fd, short events, Deadline deadline, const char* what) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, poll_timeout(deadline));
    if (rc > 0) return ok();
    if (rc == 0) {
      return make_error(ErrorCode::kTimeout,
                        std::string("timed out waiting to ") + what + " the ccpool service");
    }
    if (errno != EINTR)
      return make_error(ErrorCode::kIo, std::string("poll failed: ") + errno_text(errno));
  }
}

Error connect_error(const std::string& path, int err) {
  if (err == ENOENT || err == ECONNREFUSED || err == ENOTDIR) {
    return Error(ErrorCode::kUnreachable, "no ccpool service listens on '" + path + "' (" +
                                              errno_text(err) + "); start one with `ccpool serve`");
  }
  if (err == EACCES || err == EPERM) {
    return Error(ErrorCode::kPermission, "cannot connect to '" + path + "': " + errno_text(err) +
                                             "; the socket belongs to another user");
  }
  return Error(ErrorCode::kIo, "cannot connect to '" + path + "': " + errno_text(err));
}

Error peer_closed() {
  return Error(ErrorCode::kUnreachable, "the ccpool service closed the connection");
}

}  // namespace

Result<UniqueFd> connect_unix(const std::string& path, Deadline deadline) {
  CCPOOL_TRY_ASSIGN(sockaddr_un addr, unix_address(path));
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return make_error(ErrorCode::kIo, "socket() failed: " + errno_text(errno));
  for (;;) {
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) return fd;
    int err = errno;
    if (err == EINTR) continue;
    // A nonblocking Unix connect fails with EAGAIN while the backlog is full:
    // the service is alive but busy accepting, so retry until the deadline.
    if (err != EAGAIN) return tl::unexpected<Error>(connect_error(path, err));
    if (poll_timeout(deadline) == 0) {
      return make_error(ErrorCode::kTimeout,
                        "timed out connecting to '" + path + "' (backlog full)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

Result<void> send_message(int fd, const Message& m, Deadline deadline, int pass_fd) {
  CCPOOL_TRY_ASSIGN(std::string frame, encode_checked(m));
  return send_frames(fd, frame, deadline, pass_fd);
}

Result<void> send_frames(int fd, std::string_view frames, Deadline deadline, int pass_fd) {
  std::string_view left = frames;
  bool fd_sent = pass_fd < 0;
  while (!left.empty()) {
    // The fd rides on the frame's first bytes, so the receiver holds it by
    // the time the whole frame has arrived.
    ssize_t n = fd_sent ? ::send(fd, left.data(), left.size(), MSG_NOSIGNAL)
                        : send_with_fd(fd, left, pass_fd, MSG_NOSIGNAL);
    if (n > 0) fd_sent = true;
    if (n > 0) {
      left.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      CCPOOL_TRY(wait_for(fd, POLLOUT, deadline, "send to"));
      continue;
    }
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
      return tl::unexpected<Error>(peer_closed());
    return make_error(ErrorCode::kIo, "send failed: " + errno_text(errno));
  }
  return ok();
}

Result<Message> recv_message(int fd, FrameReader& reader, Deadline deadline) {
  char buf[64 * 1024];
  for (;;) {
    CCPOOL_TRY_ASSIGN(std::optional<Message> message, reader.next());
    if (message) return std::move(*message);
    // Poll first: the fd may be blocking, and the deadline must still hold.
    CCPOOL_TRY(wait_for(fd, POLLIN, deadline, "receive from"));
    ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      reader.feed(buf, static_cast<size_t>(n));
    } else if (n == 0) {
      return tl::unexpected<Error>(peer_closed());
    } else if (errno == ECONNRESET) {
      return tl::unexpected<Error>(peer_closed());
    } else if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
      return make_error(ErrorCode::kIo, "recv failed: " + errno_text(errno));
    }
  }
}

}  // namespace ccpool::ipc
