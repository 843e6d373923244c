// Unix-socket plumbing shared by ipc/ (the protocol socket), resp/ (the
// Redis front's socket) and workers/ (a zygote's channel): the address,
// listening, peer credentials and passing a descriptor.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include <string>
#include <string_view>

#include "base/error.h"
#include "base/fs.h"

namespace ccpool {

// sockaddr_un for `path`; kInvalidArgument when it is empty or does not fit
// (107 bytes), naming the path and the fix.
Result<sockaddr_un> unix_address(const std::string& path);

// Binds and listens on a Unix stream socket at `path`. The fd is nonblocking
// and CLOEXEC. The socket file is mode 0600 from the moment it exists (the
// socket inode is fchmod'ed before bind, whose file takes that mode on Linux,
// and the file is chmod'ed again after). A stale socket file (nobody accepts
// on it) is unlinked first; a live one is kUnsupported ("already serving");
// a path that exists and is not a socket is kInvalidArgument. `inode`, when
// given, receives the socket file's inode so the owner can later remove only
// its own file. The caller owns the directory (see ensure_private_dir).
Result<UniqueFd> listen_unix(const std::string& path, ino_t* inode = nullptr);

struct PeerCred {
  pid_t pid;
  uid_t uid;
  gid_t gid;
};
Result<PeerCred> peer_credentials(int fd);  // SO_PEERCRED

// sendmsg of `data` on `fd` with `pass_fd` attached (SCM_RIGHTS), `flags` as
// send(2)'s; what sendmsg returns. The descriptor travels with the first
// byte sent: a caller that sends the rest later sends it without.
ssize_t send_with_fd(int fd, std::string_view data, int pass_fd, int flags);

// What a client checks before it trusts a socket (docs/threat-model.md).
// The directory holding `socket_path` must pass check_private_dir (owned by
// our euid, not writable by group or others, no parent writable by everyone
// without the sticky bit); a directory that does not exist yet is fine (nobody
// can listen there). kPermission names the directory and the fix.
Result<void> check_socket_dir(const std::string& socket_path);
// kPermission unless the process that listens on the connected `fd` ran
// under our euid or root (a system unit's socket is systemd's) when it called
// listen(); the message names `socket_path`.
Result<void> check_peer_is_self(int fd, const std::string& socket_path);

}  // namespace ccpool
