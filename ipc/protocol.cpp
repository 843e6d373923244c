// Encoding and decoding of frames. The byte layout is specified in
// ipc/PROTOCOL.md; every decoder below reads the fields in the order the
// grammar lists them and checks each bound before allocating.
#include "ipc/protocol.h"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "ipc/wire.h"

namespace ccpool::ipc {
namespace {

using wire::Cursor;

constexpr uint8_t kLastType = static_cast<uint8_t>(MessageType::kPoolCancel);

void encode_payload(std::string& out, const Hello& m) {
  wire::put_u32(out, m.version);
  wire::put_u64(out, m.capabilities);
  wire::put_i32(out, m.pid);
}
void encode_payload(std::string& out, const HelloOk& m) {
  wire::put_u32(out, m.version);
  wire::put_u64(out, m.capabilities);
  wire::put_i32(out, m.service_pid);
}
void encode_payload(std::string& out, const ExecRequest& m) {
  wire::put_str(out, m.program);
  wire::put_list(out, m.argv);
  wire::put_str(out, m.cwd);
  wire::put_list(out, m.env);
  wire::put_i32(out, m.client_pid);
  wire::put_i32(out, m.rank);
  wire::put_u32(out, m.umask);
  wire::put_list(out, m.inputs);
  wire::put_list(out, m.outputs);
}
void encode_payload(std::string& out, const ExecReply& m) {
  wire::put_u8(out, static_cast<uint8_t>(m.status));
  wire::put_i32(out, m.exit_code);
  wire::put_str(out, m.stdout_data);
  wire::put_str(out, m.stderr_data);
  wire::put_u8(out, static_cast<uint8_t>(m.outcome));
  wire::put_str(out, m.message);
}
void encode_payload(std::string& out, const StatusReply& m) {
  wire::put_str(out, m.json);
}
void encode_payload(std::string& out, const ErrorFrame& m) {
  wire::put_u16(out, m.code);
  wire::put_str(out, m.message);
}
void encode_payload(std::string& out, const PoolOpen& m) {
  wire::put_str(out, m.python);
  wire::put_str(out, m.cwd);
  wire::put_list(out, m.env);
  wire::put_list(out, m.args);
  wire::put_i32(out, m.rank);
}
void encode_payload(std::string& out, const PoolOpened& m) {
  wire::put_u32(out, m.max_workers);
}
void encode_payload(std::string& out, const PoolSubmit& m) {
  wire::put_u64(out, m.job_id);
  wire::put_str(out, m.flight_key);
  wire::put_str(out, m.payload);
}
void encode_payload(std::string& out, const PoolResult& m) {
  wire::put_u64(out, m.job_id);
  wire::put_u8(out, static_cast<uint8_t>(m.status));
  wire::put_u8(out, m.followed ? 1 : 0);
  wire::put_str(out, m.payload);
  wire::put_str(out, m.message);
}
void encode_payload(std::string& out, const PoolCancel& m) {
  wire::put_u64(out, m.job_id);
}
// StatusRequest, StopRequest, StopReply, Ping, Pong: empty payload.
template <typename T>
void encode_payload(std::string&, const T&) {}

size_t payload_size_hint(const Message& m) {
  if (const auto* r = std::get_if<ExecRequest>(&m)) {
    size_t n = 64 + r->program.size() + r->cwd.size();
    for (const auto* list : {&r->argv, &r->env, &r->inputs, &r->outputs}) {
      for (const std::string& s : *list) n += 4 + s.size();
    }
    return n;
  }
  if (const auto* r = std::get_if<ExecReply>(&m)) {
    return 32 + r->stdout_data.size() + r->stderr_data.size() + r->message.size();
  }
  if (const auto* r = std::get_if<StatusReply>(&m)) return 8 + r->json.size();
  if (const auto* r = std::get_if<PoolSubmit>(&m))
    return 32 + r->flight_key.size() + r->payload.size();
  if (const auto* r = std::get_if<PoolResult>(&m))
    return 32 + r->payload.size() + r->message.size();
  return 32;
}

bool has_nul(std::string_view s) {
  return s.find('\0') != std::string_view::npos;
}

Result<void> protocol_error(const char* message_name, const char* field, const char* why) {
  return make_error(ErrorCode::kProtocol, std::string("malformed ") + message_name +
                                              " frame: field '" + field + "' " + why);
}

// Fails the cursor when the message left bytes unread: a frame is exactly one message.
void expect_end(Cursor& c) {
  if (!c.failed() && c.left() != 0) c.fail("<end>", "is followed by trailing bytes");
}

Result<Message> finish(Cursor& c, const char* name, Message m) {
  expect_end(c);
  if (c.failed()) {
    CCPOOL_TRY(protocol_error(name, c.field(), c.what()));
  }
  return m;
}

Result<Message> decode_exec_request(Cursor& c) {
  ExecRequest r;
  r.program = c.str("program", kMaxPathLength);
  r.argv = c.list("argv", kMaxArgs, kMaxFrameSize, kMaxFrameSize);
  r.cwd = c.str("cwd", kMaxPathLength);
  r.env = c.list("env", kMaxEnvEntries, kMaxEnvBytes, kMaxEnvBytes);
  r.client_pid = c.i32("client_pid");
  r.rank = c.i32("rank");
  r.umask = c.u32("umask");
  r.inputs = c.list("inputs", kMaxFiles, kMaxPathLength, uint64_t{kMaxFiles} * kMaxPathLength);
  r.outputs = c.list("outputs", kMaxFiles, kMaxPathLength, uint64_t{kMaxFiles} * kMaxPathLength);
  expect_end(c);
  if (c.failed()) {
    CCPOOL_TRY(protocol_error("exec", c.field(), c.what()));
  }
  CCPOOL_TRY(check_exec_request(r));
  return Message(std::move(r));
}

Result<Message> decode_exec_reply(Cursor& c) {
  ExecReply r;
  uint8_t status = c.u8("status");
  r.exit_code = c.i32("exit_code");
  r.stdout_data = c.str("stdout", kMaxFrameSize);
  r.stderr_data = c.str("stderr", kMaxFrameSize);
  uint8_t outcome = c.u8("outcome");
  r.message = c.str("message", kMaxFrameSize);
  if (status > static_cast<uint8_t>(ExecStatus::kFailed)) c.fail("status", "is not a known status");
  if (outcome > static_cast<uint8_t>(CacheOutcome::kRemoteHit))
    c.fail("outcome", "is not a known outcome");
  r.status = static_cast<ExecStatus>(status);
  r.outcome = static_cast<CacheOutcome>(outcome);
  return finish(c, "exec-reply", std::move(r));
}

Result<Message> decode_pool_open(Cursor& c) {
  PoolOpen r;
  r.python = c.str("python", kMaxPathLength);
  r.cwd = c.str("cwd", kMaxPathLength);
  r.env = c.list("env", kMaxEnvEntries, kMaxEnvBytes, kMaxEnvBytes);
  r.args =
      c.list("args", kMaxPoolArgs, kMaxPoolArgLength, uint64_t{kMaxPoolArgs} * kMaxPoolArgLength);
  r.rank = c.i32("rank");
  expect_end(c);
  if (c.failed()) {
    CCPOOL_TRY(protocol_error("pool-open", c.field(), c.what()));
  }
  CCPOOL_TRY(check_pool_open(r));
  return Message(std::move(r));
}

Result<Message> decode_pool_result(Cursor& c) {
  PoolResult r;
  r.job_id = c.u64("job_id");
  uint8_t status = c.u8("status");
  uint8_t followed = c.u8("followed");
  r.payload = c.str("payload", kMaxFrameSize);
  r.message = c.str("message", kMaxFrameSize);
  if (status > static_cast<uint8_t>(PoolJobStatus::kFailed))
    c.fail("status", "is not a known status");
  if (followed > 1) c.fail("followed", "is not 0 or 1");
  r.status = static_cast<PoolJobStatus>(status);
  r.followed = followed == 1;
  return finish(c, "pool-result", std::move(r));
}

}  // namespace

const char* message_type_name(const Message& m) {
  static constexpr const char* kNames[] = {
      "hello",       "hello-ok",    "exec",        "exec-reply", "status", "status-reply",
      "stop",        "stop-reply",  "ping",        "pong",       "error",  "pool-open",
      "pool-opened", "pool-submit", "pool-result", "pool-cancel"};
  return kNames[m.index()];
}

std::string encode(const Message& m) {
  std::string out;
  out.reserve(kFrameHeaderSize + payload_size_hint(m));
  wire::put_u32(out, kFrameMagic);
  wire::put_u8(out, kFrameVersion);
  wire::put_u8(out, static_cast<uint8_t>(m.index() + 1));
  wire::put_u16(out, 0);
  wire::put_u32(out, 0);  // payload length, patched below
  std::visit([&out](const auto& msg) { encode_payload(out, msg); }, m);
  uint32_t length =
      static_cast<uint32_t>(std::min<size_t>(out.size() - kFrameHeaderSize, UINT32_MAX));
  for (int i = 0; i < 4; ++i) out[8 + i] = static_cast<char>(length >> (8 * i));
  return out;
}

Result<std::string> encode_checked(const Message& m) {
  if (const auto* r = std::get_if<ExecRequest>(&m)) {
    auto checked = check_exec_request(*r);
    if (!checked) return make_error(ErrorCode::kInvalidArgument, checked.error().message);
  }
  std::string frame = encode(m);
  if (frame.size() - kFrameHeaderSize > kMaxFrameSize) {
    return make_error(ErrorCode::kFull, std::string(message_type_name(m)) + " message of " +
                                            std::to_string(frame.size() - kFrameHeaderSize) +
                                            " bytes exceeds the frame bound of " +
                                            std::to_string(kMaxFrameSize) + " bytes");
  }
  return frame;
}

Result<void> check_exec_request(const ExecRequest& r) {
  if (r.program.empty()) return protocol_error("exec", "program", "is empty");
  if (r.program.size() > kMaxPathLength)
    return protocol_error("exec", "program", "is longer than its bound");
  if (r.cwd.size() > kMaxPathLength)
    return protocol_error("exec", "cwd", "is longer than its bound");
  if (has_nul(r.program) || has_nul(r.cwd))
    return protocol_error("exec", "program/cwd", "contains a NUL byte");
  if (r.argv.size() > kMaxArgs)
    return protocol_error("exec", "argv", "has more entries than its bound");
  if (r.env.size() > kMaxEnvEntries)
    return protocol_error("exec", "env", "has more entries than its bound");
  size_t env_bytes = 0;
  for (const std::string& e : r.env) {
    env_bytes += e.size();
    if (has_nul(e)) return protocol_error("exec", "env", "contains a NUL byte");
  }
  if (env_bytes > kMaxEnvBytes)
    return protocol_error("exec", "env", "total size exceeds its bound");
  for (const std::string& a : r.argv) {
    if (has_nul(a)) return protocol_error("exec", "argv", "contains a NUL byte");
  }
  for (const auto* list : {&r.inputs, &r.outputs}) {
    if (list->size() > kMaxFiles)
      return protocol_error("exec", "inputs/outputs", "has more entries than its bound");
    for (const std::string& f : *list) {
      if (f.empty() || f.size() > kMaxPathLength || has_nul(f)) {
        return protocol_error("exec", "inputs/outputs",
                              "holds an empty, NUL-containing or too long path");
      }
    }
  }
  return ok();
}

Result<void> check_pool_open(const PoolOpen& r) {
  for (const auto& [field, path] : {std::pair{"python", &r.python}, std::pair{"cwd", &r.cwd}}) {
    if (path->empty() || (*path)[0] != '/')
      return protocol_error("pool-open", field, "is not an absolute path");
    if (path->size() > kMaxPathLength || has_nul(*path)) {
      return protocol_error("pool-open", field, "is too long or contains a NUL byte");
    }
  }
  if (r.env.size() > kMaxEnvEntries)
    return protocol_error("pool-open", "env", "has more entries than its bound");
  size_t env_bytes = 0;
  for (const std::string& e : r.env) {
    env_bytes += e.size();
    if (has_nul(e) || e.find('=') == std::string::npos) {
      return protocol_error("pool-open", "env", "holds an entry with a NUL byte or without '='");
    }
  }
  if (env_bytes > kMaxEnvBytes)
    return protocol_error("pool-open", "env", "total size exceeds its bound");
  if (r.args.size() > kMaxPoolArgs)
    return protocol_error("pool-open", "args", "has more entries than its bound");
  for (const std::string& a : r.args) {
    if (a.size() > kMaxPoolArgLength || has_nul(a) || a.rfind("--", 0) != 0 ||
        a.find('=') == std::string::npos) {
      return protocol_error("pool-open", "args", "holds an entry that is not --name=value");
    }
  }
  return ok();
}

Result<void> check_hello(const Hello& h) {
  if (h.version == kProtocolVersion) return ok();
  return make_error(ErrorCode::kUnsupported,
                    "client speaks ccpool protocol version " + std::to_string(h.version) +
                        " but this service speaks version " + std::to_string(kProtocolVersion) +
                        "; use a ccpool client and service from the same release");
}

ErrorFrame to_error_frame(const Error& e) {
  return ErrorFrame{static_cast<uint16_t>(e.code), e.message};
}

Error from_error_frame(const ErrorFrame& f) {
  if (f.code > static_cast<uint16_t>(ErrorCode::kInternal)) {
    return Error(ErrorCode::kProtocol,
                 "service error (unknown code " + std::to_string(f.code) + "): " + f.message);
  }
  return Error(static_cast<ErrorCode>(f.code), f.message);
}

Result<Message> decode_payload(uint8_t type, const char* data, size_t n) {
  Cursor c(data, n);
  switch (static_cast<MessageType>(type)) {
    case MessageType::kHello: {
      Hello h;
      h.version = c.u32("version");
      h.capabilities = c.u64("capabilities");
      h.pid = c.i32("pid");
      return finish(c, "hello", h);
    }
    case MessageType::kHelloOk: {
      HelloOk h;
      h.version = c.u32("version");
      h.capabilities = c.u64("capabilities");
      h.service_pid = c.i32("service_pid");
      return finish(c, "hello-ok", h);
    }
    case MessageType::kExecRequest:
      return decode_exec_request(c);
    case MessageType::kExecReply:
      return decode_exec_reply(c);
    case MessageType::kStatusRequest:
      return finish(c, "status", StatusRequest{});
    case MessageType::kStatusReply: {
      StatusReply r;
      r.json = c.str("json", kMaxFrameSize);
      return finish(c, "status-reply", std::move(r));
    }
    case MessageType::kStopRequest:
      return finish(c, "stop", StopRequest{});
    case MessageType::kStopReply:
      return finish(c, "stop-reply", StopReply{});
    case MessageType::kPing:
      return finish(c, "ping", Ping{});
    case MessageType::kPong:
      return finish(c, "pong", Pong{});
    case MessageType::kErrorFrame: {
      ErrorFrame e;
      e.code = c.u16("code");
      e.message = c.str("message", kMaxFrameSize);
      return finish(c, "error", std::move(e));
    }
    case MessageType::kPoolOpen:
      return decode_pool_open(c);
    case MessageType::kPoolOpened: {
      PoolOpened r;
      r.max_workers = c.u32("max_workers");
      return finish(c, "pool-opened", r);
    }
    case MessageType::kPoolSubmit: {
      PoolSubmit r;
      r.job_id = c.u64("job_id");
      r.flight_key = c.str("flight_key", kMaxFlightKey);
      r.payload = c.str("payload", kMaxFrameSize);
      return finish(c, "pool-submit", std::move(r));
    }
    case MessageType::kPoolResult:
      return decode_pool_result(c);
    case MessageType::kPoolCancel: {
      PoolCancel r;
      r.job_id = c.u64("job_id");
      return finish(c, "pool-cancel", r);
    }
  }
  return make_error(ErrorCode::kProtocol, "unknown frame type " + std::to_string(type) +
                                              " (known: 1.." + std::to_string(kLastType) + ")");
}

}  // namespace ccpool::ipc
