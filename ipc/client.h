// Blocking protocol client: one connection to the service. Used by
// ccpool-client, `ccpool status/stop/exec`, tests and benchmarks.
// Move-only; owns the fd. Not thread-safe (one request at a time).
#pragma once

#include <string>

#include "base/error.h"
#include "base/fs.h"
#include "ipc/protocol.h"
#include "ipc/socket.h"

namespace ccpool::ipc {

// When the hello goes out: at once (connect waits for hello-ok), or in the
// same write as the first request (PROTOCOL.md, "Conversation"), which saves
// a round trip and a write on each side; hello-ok is then read and checked
// before that request's reply.
enum class Handshake { kNow, kWithFirstRequest };

class Client {
 public:
  // Checks whom it talks to, then connects and performs the Hello/HelloOk
  // handshake before `deadline` (with kWithFirstRequest: only connects; the
  // first request does the handshake, hello-ok still due by `deadline`).
  // kPermission, before anything is sent, when the socket's directory is not
  // ours (check_socket_dir) or the listener runs under another uid
  // (check_peer_is_self). An ErrorFrame reply maps to its ErrorCode (e.g.
  // kPermission for a refused uid, kUnsupported for a version mismatch).
  static Result<Client> connect(const std::string& socket, Deadline deadline,
                                uint64_t capabilities = 0, Handshake handshake = Handshake::kNow);

  Client(Client&&) noexcept = default;
  Client& operator=(Client&&) noexcept = default;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // The service's answer to the handshake (after the first request with
  // Handshake::kWithFirstRequest).
  const HelloOk& hello() const { return m_hello; }
  int fd() const { return m_fd.get(); }

  // The reply as the service sent it; kStopping/kFailed replies are returned
  // as values (the caller decides to fall back), an ErrorFrame is an error.
  // stdin_fd >= 0 travels with the request (the tool's stdin if the service
  // runs it as a pass-through).
  Result<ExecReply> exec(const ExecRequest& request, Deadline deadline, int stdin_fd = -1);
  Result<std::string> status_json(Deadline deadline);
  Result<void> stop(Deadline deadline);
  Result<void> ping(Deadline deadline);

 private:
  Client(UniqueFd fd) : m_fd(std::move(fd)) {}
  Result<Message> round_trip(const Message& request, Deadline deadline, int pass_fd = -1);
  // Reads hello-ok and checks its version.
  Result<void> finish_handshake(Deadline deadline);

  UniqueFd m_fd;
  FrameReader m_reader;
  HelloOk m_hello;
  std::string m_pending_hello;  // encoded, not sent yet (kWithFirstRequest)
  Deadline m_handshake_deadline{};
};

}  // namespace ccpool::ipc
