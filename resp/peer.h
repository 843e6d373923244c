// Who is on the other end of an accepted TCP connection (a Unix socket's peer
// comes from base/unix_socket.h). Used by the front and by service/metrics_server.cpp.
#pragma once

#include <netinet/in.h>
#include <sys/types.h>

#include <string>

#include "base/error.h"

namespace ccpool::resp {

// The uid owning the *client's* end of a loopback TCP connection whose server
// end is `fd`. Asks the kernel through NETLINK_SOCK_DIAG (an exact lookup of
// the client's 4-tuple; its reply carries idiag_uid). When netlink is not
// available (seccomp, old kernel) it falls back to /proc/net/tcp, whose line
// with local address = the peer's address names the owner uid. Errors:
// kNotFound (the client already closed), kIo.
Result<uid_t> tcp_peer_uid(int fd);

// The /proc/net/tcp fallback alone, for tests. `table` is the file's content.
Result<uid_t> uid_from_proc_net_tcp(const std::string& table, const sockaddr_in& peer,
                                    const sockaddr_in& local);

}  // namespace ccpool::resp
