#include "ipc/client.h"

#include <unistd.h>

#include <algorithm>
#include <string_view>

namespace ccpool::ipc {
namespace {

Error unexpected_reply(const char* request, const Message& reply) {
  return Error(ErrorCode::kProtocol, std::string("the service answered a ") + request +
                                         " request with a " + message_type_name(reply) + " frame");
}

}  // namespace

Result<Client> Client::connect(const std::string& socket, Deadline deadline, uint64_t capabilities,
                               Handshake handshake) {
  // Nothing is sent before we know the listener is us (docs/threat-model.md):
  // the directory first, so an impostor's socket is never even connected to.
  CCPOOL_TRY(check_socket_dir(socket));
  CCPOOL_TRY_ASSIGN(UniqueFd fd, connect_unix(socket, deadline));
  CCPOOL_TRY(check_peer_is_self(fd.get(), socket));
  Client client(std::move(fd));
  Hello hello;
  hello.capabilities = capabilities;
  hello.pid = static_cast<int32_t>(::getpid());
  client.m_pending_hello = encode(hello);
  client.m_handshake_deadline = deadline;
  if (handshake == Handshake::kNow) {
    CCPOOL_TRY(send_frames(client.m_fd.get(), client.m_pending_hello, deadline));
    client.m_pending_hello.clear();
    CCPOOL_TRY(client.finish_handshake(deadline));
  }
  return client;
}

Result<void> Client::finish_handshake(Deadline deadline) {
  CCPOOL_TRY_ASSIGN(Message reply, recv_message(m_fd.get(), m_reader, deadline));
  if (const auto* error = std::get_if<ErrorFrame>(&reply)) {
    return tl::unexpected<Error>(from_error_frame(*error));
  }
  const auto* ok_reply = std::get_if<HelloOk>(&reply);
  if (!ok_reply) return tl::unexpected<Error>(unexpected_reply("hello", reply));
  if (ok_reply->version != kProtocolVersion) {
    return make_error(ErrorCode::kUnsupported,
                      "the service speaks ccpool protocol version " +
                          std::to_string(ok_reply->version) + " but this client speaks version " +
                          std::to_string(kProtocolVersion) +
                          "; restart the service with `ccpool stop` so a matching one starts");
  }
  m_hello = *ok_reply;
  return ok();
}

Result<Message> Client::round_trip(const Message& request, Deadline deadline, int pass_fd) {
  if (m_pending_hello.empty()) {
    CCPOOL_TRY(send_message(m_fd.get(), request, deadline, pass_fd));
  } else {
    // hello and the request in one write; pass_fd rides on its first bytes
    // and the service keeps it for the request (PROTOCOL.md).
    CCPOOL_TRY_ASSIGN(std::string frame, encode_checked(request));
    std::string frames = std::move(m_pending_hello);
    m_pending_hello.clear();
    frames += frame;
    CCPOOL_TRY(send_frames(m_fd.get(), frames, std::min(deadline, m_handshake_deadline), pass_fd));
    CCPOOL_TRY(finish_handshake(m_handshake_deadline));
  }
  CCPOOL_TRY_ASSIGN(Message reply, recv_message(m_fd.get(), m_reader, deadline));
  if (const auto* error = std::get_if<ErrorFrame>(&reply)) {
    return tl::unexpected<Error>(from_error_frame(*error));
  }
  return reply;
}

Result<ExecReply> Client::exec(const ExecRequest& request, Deadline deadline, int stdin_fd) {
  CCPOOL_TRY_ASSIGN(Message reply, round_trip(request, deadline, stdin_fd));
  if (auto* r = std::get_if<ExecReply>(&reply)) return std::move(*r);
  return tl::unexpected<Error>(unexpected_reply("exec", reply));
}

Result<std::string> Client::status_json(Deadline deadline) {
  CCPOOL_TRY_ASSIGN(Message reply, round_trip(StatusRequest{}, deadline));
  if (auto* r = std::get_if<StatusReply>(&reply)) return std::move(r->json);
  return tl::unexpected<Error>(unexpected_reply("status", reply));
}

Result<void> Client::stop(Deadline deadline) {
  CCPOOL_TRY_ASSIGN(Message reply, round_trip(StopRequest{}, deadline));
  if (std::holds_alternative<StopReply>(reply)) return ok();
  return tl::unexpected<Error>(unexpected_reply("stop", reply));
}

Result<void> Client::ping(Deadline deadline) {
  CCPOOL_TRY_ASSIGN(Message reply, round_trip(Ping{}, deadline));
  if (std::holds_alternative<Pong>(reply)) return ok();
  return tl::unexpected<Error>(unexpected_reply("ping", reply));
}

}  // namespace ccpool::ipc
