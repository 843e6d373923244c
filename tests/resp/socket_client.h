// A blocking test client for the front: raw bytes in, raw bytes out, every
// read bounded by a poll deadline so a broken server fails the test instead
// of hanging it.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <optional>
#include <string>

#include "base/fs.h"

namespace ccpool::resp::testing {

inline UniqueFd connect_unix(const std::string& path) {
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return UniqueFd();
  return fd;
}

inline UniqueFd connect_tcp(int port) {
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return UniqueFd();
  return fd;
}

inline bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Reads exactly `n` bytes; returns fewer when the peer closes or 10 s pass.
inline std::string read_exact(int fd, size_t n) {
  std::string out;
  char buffer[65536];
  while (out.size() < n) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 10'000) <= 0) break;
    ssize_t got = recv(fd, buffer, std::min(sizeof(buffer), n - out.size()), 0);
    if (got <= 0) break;
    out.append(buffer, static_cast<size_t>(got));
  }
  return out;
}

// Reads until the peer closes (or 10 s pass without a byte).
inline std::string read_to_close(int fd) {
  return read_exact(fd, SIZE_MAX);
}

inline std::string command(std::initializer_list<std::string_view> args) {
  std::string wire = "*" + std::to_string(args.size()) + "\r\n";
  for (std::string_view arg : args) {
    wire += "$" + std::to_string(arg.size()) + "\r\n";
    wire.append(arg);
    wire += "\r\n";
  }
  return wire;
}

inline std::string bulk(std::string_view value) {
  return "$" + std::to_string(value.size()) + "\r\n" + std::string(value) + "\r\n";
}

// One request, one reply of known length.
inline std::string round_trip(int fd, const std::string& request, size_t reply_size) {
  if (!send_all(fd, request)) return "";
  return read_exact(fd, reply_size);
}

}  // namespace ccpool::resp::testing
