#include "service/activation.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "base/process_facts.h"

namespace ccpool::service {
namespace {

constexpr int kFirstPassedFd = 3;  // SD_LISTEN_FDS_START

bool parse_u64(const std::optional<std::string>& text, unsigned long long& out) {
  if (!text || text->empty()) return false;
  char* end = nullptr;
  errno = 0;
  out = std::strtoull(text->c_str(), &end, 10);
  return errno == 0 && *end == '\0';
}

int sockopt(int fd, int name) {
  int value = -1;
  socklen_t len = sizeof value;
  if (::getsockopt(fd, SOL_SOCKET, name, &value, &len) != 0) return -1;
  return value;
}

std::string bound_path(int fd) {
  sockaddr_un addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return {};
  if (len <= offsetof(sockaddr_un, sun_path) || addr.sun_path[0] == '\0') return {};
  return std::string(addr.sun_path, strnlen(addr.sun_path, len - offsetof(sockaddr_un, sun_path)));
}

Result<UniqueFd> check_passed_socket(int fd, const std::string& socket_path) {
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode) || sockopt(fd, SO_DOMAIN) != AF_UNIX ||
      sockopt(fd, SO_TYPE) != SOCK_STREAM || sockopt(fd, SO_ACCEPTCONN) != 1) {
    return make_error(ErrorCode::kInvalidArgument,
                      "the descriptor systemd passed (fd 3) is not a listening Unix stream socket; "
                      "use ListenStream=/path/to/sock in the .socket unit");
  }
  std::string path = bound_path(fd);
  if (path != socket_path) {
    return make_error(
        ErrorCode::kInvalidArgument,
        "systemd passed a socket bound to '" + path + "' but the service's socket is '" +
            socket_path +
            "'; make ListenStream= and --socket (or CCPOOL_SOCKET) name the same path");
  }
  int flags = ::fcntl(fd, F_GETFL);
  int fd_flags = ::fcntl(fd, F_GETFD);
  if (flags < 0 || fd_flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0 ||
      ::fcntl(fd, F_SETFD, fd_flags | FD_CLOEXEC) != 0) {
    return make_error(ErrorCode::kIo,
                      std::string("cannot set up the passed socket: ") + std::strerror(errno));
  }
  return UniqueFd(fd);
}

}  // namespace

Result<UniqueFd> take_activation_socket(const std::string& socket_path) {
  unsigned long long pid = 0, count = 0;
  bool for_us =
      parse_u64(own_env("LISTEN_PID"), pid) && pid == static_cast<unsigned long long>(::getpid());
  bool has_count = parse_u64(own_env("LISTEN_FDS"), count);
  ::unsetenv("LISTEN_PID");
  ::unsetenv("LISTEN_FDS");
  ::unsetenv("LISTEN_FDNAMES");
  if (!for_us || !has_count || count == 0) return UniqueFd();
  if (count != 1) {
    for (unsigned long long i = 0; i < count && i < 1024; ++i)
      ::close(kFirstPassedFd + static_cast<int>(i));
    return make_error(
        ErrorCode::kInvalidArgument,
        "systemd passed " + std::to_string(count) +
            " sockets; ccpool serve takes exactly one: give its .socket unit one ListenStream=");
  }
  auto fd = check_passed_socket(kFirstPassedFd, socket_path);
  if (!fd) ::close(kFirstPassedFd);
  return fd;
}

bool stderr_is_journal() {
  std::optional<std::string> stream = own_env("JOURNAL_STREAM");
  if (!stream) return false;
  unsigned long long dev = 0, ino = 0;
  if (std::sscanf(stream->c_str(), "%llu:%llu", &dev, &ino) != 2) return false;
  struct stat st;
  if (::fstat(STDERR_FILENO, &st) != 0) return false;
  return static_cast<unsigned long long>(st.st_dev) == dev &&
         static_cast<unsigned long long>(st.st_ino) == ino;
}

}  // namespace ccpool::service
