// Peer identification for the front's two listeners; see docs/resp-front.md
// for why sock_diag is the primary path on TCP.
#include "resp/peer.h"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "base/fs.h"

namespace ccpool::resp {
namespace {

// One SOCK_DIAG_BY_FAMILY request for exactly one socket: the client's end,
// whose local (src) side is the peer address we accepted from and whose remote
// (dst) side is our listening address. No dump, so the reply is one message.
Result<uid_t> sock_diag_uid(const sockaddr_in& peer, const sockaddr_in& local) {
  UniqueFd nl(socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
  if (!nl) return make_error(ErrorCode::kIo, "socket(NETLINK_SOCK_DIAG): " + errno_text(errno));
  timeval timeout{1, 0};  // the kernel answers at once; this only guards a broken stack
  setsockopt(nl.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));

  struct {
    nlmsghdr header;
    inet_diag_req_v2 request;
  } message{};
  message.header.nlmsg_len = sizeof(message);
  message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  message.header.nlmsg_flags = NLM_F_REQUEST;
  message.header.nlmsg_seq = 1;
  message.request.sdiag_family = AF_INET;
  message.request.sdiag_protocol = IPPROTO_TCP;
  message.request.idiag_states = ~0u;
  message.request.id.idiag_sport = peer.sin_port;
  message.request.id.idiag_dport = local.sin_port;
  message.request.id.idiag_src[0] = peer.sin_addr.s_addr;
  message.request.id.idiag_dst[0] = local.sin_addr.s_addr;
  message.request.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
  message.request.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;

  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (sendto(nl.get(), &message, sizeof(message), 0, reinterpret_cast<sockaddr*>(&kernel),
             sizeof(kernel)) < 0) {
    return make_error(ErrorCode::kIo, "sock_diag request: " + errno_text(errno));
  }
  alignas(nlmsghdr) char buffer[8192];
  ssize_t n = recv(nl.get(), buffer, sizeof(buffer), 0);
  if (n < 0) return make_error(ErrorCode::kIo, "sock_diag reply: " + errno_text(errno));
  auto* header = reinterpret_cast<nlmsghdr*>(buffer);
  for (int len = static_cast<int>(n); NLMSG_OK(header, len); header = NLMSG_NEXT(header, len)) {
    if (header->nlmsg_type == NLMSG_ERROR) {
      auto* err = static_cast<nlmsgerr*>(NLMSG_DATA(header));
      if (err->error == -ENOENT)
        return make_error(ErrorCode::kNotFound, "the TCP peer already closed");
      return make_error(ErrorCode::kIo, std::string("sock_diag: ") + std::strerror(-err->error));
    }
    if (header->nlmsg_type != SOCK_DIAG_BY_FAMILY) continue;
    auto* diag = static_cast<inet_diag_msg*>(NLMSG_DATA(header));
    // The lookup can fall back to a listener; accept only the exact socket.
    if (diag->id.idiag_sport == peer.sin_port && diag->id.idiag_dport == local.sin_port &&
        diag->id.idiag_src[0] == peer.sin_addr.s_addr) {
      return static_cast<uid_t>(diag->idiag_uid);
    }
  }
  return make_error(ErrorCode::kNotFound, "sock_diag returned no socket for the TCP peer");
}

std::string proc_address(const sockaddr_in& address) {
  // /proc/net/tcp prints the __be32 address as a host-order %08X and the port in host order.
  char text[32];
  std::snprintf(text, sizeof(text), "%08X:%04X", static_cast<unsigned>(address.sin_addr.s_addr),
                static_cast<unsigned>(ntohs(address.sin_port)));
  return text;
}

}  // namespace

Result<uid_t> uid_from_proc_net_tcp(const std::string& table, const sockaddr_in& peer,
                                    const sockaddr_in& local) {
  // "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid ..."
  std::string want_local = proc_address(peer);
  std::string want_remote = proc_address(local);
  std::istringstream lines(table);
  std::string line;
  std::getline(lines, line);  // header
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string slot, local_field, remote_field, state, queues, timer, retransmits;
    long uid = -1;
    if (!(fields >> slot >> local_field >> remote_field >> state >> queues >> timer >>
          retransmits >> uid))
      continue;
    if (local_field == want_local && remote_field == want_remote) return static_cast<uid_t>(uid);
  }
  return make_error(ErrorCode::kNotFound, "no /proc/net/tcp line for the TCP peer " + want_local);
}

Result<uid_t> tcp_peer_uid(int fd) {
  sockaddr_in peer{}, local{};
  socklen_t peer_len = sizeof(peer), local_len = sizeof(local);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) {
    return make_error(ErrorCode::kNotFound, "getpeername: " + errno_text(errno));
  }
  if (peer.sin_family != AF_INET)
    return make_error(ErrorCode::kUnsupported, "the TCP listener is IPv4 only");
  auto uid = sock_diag_uid(peer, local);
  if (uid || uid.error().code == ErrorCode::kNotFound) return uid;
  auto table = read_file("/proc/net/tcp");
  if (!table)
    return make_error(ErrorCode::kIo, uid.error().message + "; and " + table.error().message);
  return uid_from_proc_net_tcp(*table, peer, local);
}

}  // namespace ccpool::resp
