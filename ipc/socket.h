// Unix-socket plumbing for the protocol: listen, connect, peer credentials and
// blocking send/receive of whole messages. Every blocking call takes a deadline
// and errors are typed (see PROTOCOL.md, "Errors"):
//   kUnreachable  no one listens (ENOENT, ECONNREFUSED)
//   kTimeout      the deadline passed
//   kProtocol     the peer sent a malformed frame or closed mid-conversation
//   kPermission   EACCES, or the service refused our uid
//   kStopping     the service said it is stopping
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <string_view>

#include "base/error.h"
#include "base/fs.h"
#include "base/unix_socket.h"
#include "ipc/protocol.h"

namespace ccpool::ipc {

using Deadline = std::chrono::steady_clock::time_point;

// A deadline `d` from now; a helper for callers and tests.
inline Deadline deadline_in(std::chrono::milliseconds d) {
  return std::chrono::steady_clock::now() + d;
}

// listen_unix, PeerCred and peer_credentials live in base/unix_socket.h,
// shared with the Redis front; the protocol uses them under these names.
using ccpool::listen_unix;
using ccpool::peer_credentials;
using ccpool::PeerCred;

// Connects to `path`. The returned fd is blocking-mode-agnostic (the helpers
// below poll) and CLOEXEC.
Result<UniqueFd> connect_unix(const std::string& path, Deadline deadline);

// Writes one whole frame, polling for POLLOUT until `deadline`. With pass_fd
// >= 0, that descriptor travels with the frame's first bytes (SCM_RIGHTS):
// an exec frame carries the client's stdin this way (PROTOCOL.md).
Result<void> send_message(int fd, const Message& m, Deadline deadline, int pass_fd = -1);
// The same for bytes already encoded (one or more whole frames).
Result<void> send_frames(int fd, std::string_view frames, Deadline deadline, int pass_fd = -1);
// Reads until `reader` yields one message, polling for POLLIN until `deadline`.
// EOF before a whole frame is kProtocol ("connection closed by peer").
Result<Message> recv_message(int fd, FrameReader& reader, Deadline deadline);

}  // namespace ccpool::ipc
