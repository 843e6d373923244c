// The ccpool wire protocol: message types, hard bounds, frame encoding and an
// incremental decoder. The byte layout is specified in ipc/PROTOCOL.md; the
// encoder and decoder in protocol.cpp follow it field by field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "base/error.h"

namespace ccpool::ipc {

inline constexpr uint32_t kProtocolVersion = 1;

// Hard bounds, checked on decode BEFORE any allocation sized from the wire.
inline constexpr uint32_t kMaxFrameSize = 64u << 20;  // payload bytes of one frame
inline constexpr uint32_t kMaxArgs = 32768;           // argv entries
inline constexpr uint32_t kMaxPathLength = 4096;      // program, cwd, each input/output
inline constexpr uint32_t kMaxEnvBytes = 1u << 20;    // sum of env entry lengths
inline constexpr uint32_t kMaxEnvEntries = 8192;
inline constexpr uint32_t kMaxFiles = 4096;          // inputs + outputs, each list
inline constexpr uint32_t kMaxPoolArgs = 16;         // pool-open worker arguments
inline constexpr uint32_t kMaxPoolArgLength = 4096;  // each of them
inline constexpr uint32_t kMaxFlightKey = 128;       // pool-submit flight key bytes
// A pool-submit with this flight key is Inductor's readiness probe: answered
// "done" (empty payload) once a worker of the session's environment is up.
inline constexpr const char* kReadyProbeKey = "ccpool:ready";

// Frame header: magic "CCPL" (4 bytes), version (1 byte), type (1 byte),
// reserved (2 bytes, zero), payload length (4 bytes, little-endian).
inline constexpr uint32_t kFrameMagic = 0x4c504343;  // "CCPL" read as LE u32
inline constexpr size_t kFrameHeaderSize = 12;
inline constexpr uint8_t kFrameVersion = 1;  // version of the framing itself

struct Hello {
  uint32_t version = kProtocolVersion;
  uint64_t capabilities = 0;
  int32_t pid = 0;
};
struct HelloOk {
  uint32_t version = kProtocolVersion;
  uint64_t capabilities = 0;
  int32_t service_pid = 0;
};

struct ExecRequest {
  std::string program;            // resolved absolute path of the tool
  std::vector<std::string> argv;  // argv[0] as the caller gave it
  std::string cwd;
  std::vector<std::string> env;  // "NAME=value", the caller's full environment
  int32_t client_pid = 0;
  int32_t rank = -1;  // rank if known (RANK/LOCAL_RANK), else -1
  uint32_t umask = 022;
  std::vector<std::string> inputs, outputs;  // declared files, absolute or cwd-relative
};

enum class ExecStatus : uint8_t {
  kCompleted =
      0,  // the tool ran (or a cached result was served): exit_code/stdout/stderr are the tool's
  kStopping = 1,  // the service is stopping: run the tool yourself
  kFailed = 2,    // the service could not do it (internal error): run the tool yourself
};
enum class CacheOutcome : uint8_t { kNone = 0, kHit, kMiss, kJoin, kPassthrough, kRemoteHit };

struct ExecReply {
  ExecStatus status = ExecStatus::kCompleted;
  int32_t exit_code = 0;
  std::string stdout_data, stderr_data;
  CacheOutcome outcome = CacheOutcome::kNone;
  std::string message;
};

struct StatusRequest {};
struct StatusReply {
  std::string json;
};
struct StopRequest {};
struct StopReply {};
struct Ping {};
struct Pong {};
struct ErrorFrame {
  uint16_t code = 0;  // a ccpool::ErrorCode value
  std::string message;
};

// A pool session (PROTOCOL.md, "Pool sessions"): after pool-open the
// connection carries the jobs an Inductor rank would give its own compile
// workers; many may be in flight, and results come back in any order.
struct PoolOpen {
  std::string python;             // absolute path of the rank's interpreter (sys.executable)
  std::string cwd;                // the rank's working directory
  std::vector<std::string> env;   // the workers' environment, "NAME=value"
  std::vector<std::string> args;  // worker options, each "--name=value" (--pickler, --torch-key)
  int32_t rank = -1;              // LOCAL_RANK, else RANK, else -1: the fairness bucket
};
struct PoolOpened {
  uint32_t max_workers = 0;  // the node pool's bound
};
struct PoolSubmit {
  uint64_t job_id = 0;     // chosen by the client, unique within the session
  std::string flight_key;  // jobs with equal keys run one after another (may be empty)
  std::string payload;     // the pickled job, opaque to the service
};
enum class PoolJobStatus : uint8_t {
  kDone = 0,  // a worker ran the job: payload is its pickled result (or the job's exception)
  kFailed =
      1,  // the pool could not run it (worker died, stopping, bad environment): run it yourself
};
struct PoolResult {
  uint64_t job_id = 0;
  PoolJobStatus status = PoolJobStatus::kDone;
  bool followed = false;  // ran after an equal job of another rank (its compiles were cached)
  std::string payload;
  std::string message;  // why, for kFailed
};
struct PoolCancel {
  uint64_t job_id = 0;
};

using Message = std::variant<Hello, HelloOk, ExecRequest, ExecReply, StatusRequest, StatusReply,
                             StopRequest, StopReply, Ping, Pong, ErrorFrame, PoolOpen, PoolOpened,
                             PoolSubmit, PoolResult, PoolCancel>;

// Frame type byte of each message: the variant index + 1 (0 is never valid).
enum class MessageType : uint8_t {
  kHello = 1,
  kHelloOk,
  kExecRequest,
  kExecReply,
  kStatusRequest,
  kStatusReply,
  kStopRequest,
  kStopReply,
  kPing,
  kPong,
  kErrorFrame,
  kPoolOpen,
  kPoolOpened,
  kPoolSubmit,
  kPoolResult,
  kPoolCancel,
};
const char* message_type_name(const Message& m);

std::string encode(const Message& m);  // one complete frame

// encode() plus the sender-side checks a receiver would apply: the payload
// fits kMaxFrameSize (kFull otherwise: e.g. a tool printed > 64 MiB) and an
// ExecRequest is within its bounds (kInvalidArgument). Use this for any
// message built from untrusted or unbounded data.
Result<std::string> encode_checked(const Message& m);

// The bounds a PoolOpen must satisfy: python and cwd absolute, env as for
// exec, each arg "--name=value" within kMaxPoolArgLength, no NUL anywhere.
Result<void> check_pool_open(const PoolOpen& r);

// The bounds an ExecRequest must satisfy (argc, env, path lengths, file
// counts, no NUL inside argv/env/paths). kProtocol naming the field.
Result<void> check_exec_request(const ExecRequest& r);

// Server side of the handshake: kUnsupported naming both versions when the
// client speaks another protocol version.
Result<void> check_hello(const Hello& h);

// Builds an ErrorFrame from an Error (code and message carried over).
ErrorFrame to_error_frame(const Error& e);
// The Error an ErrorFrame stands for; unknown codes map to kProtocol.
Error from_error_frame(const ErrorFrame& f);

// Incremental decoder for a non-blocking server/client: feed bytes, pull whole
// messages. Not thread-safe; one reader per connection. After next() returned
// an error the reader is poisoned (every later next() returns that error): the
// connection must be closed after sending an ErrorFrame.
class FrameReader {
 public:
  void feed(const char* data, size_t n);
  // nullopt = need more bytes; error (kProtocol) = malformed/oversized/unknown type.
  Result<std::optional<Message>> next();
  size_t buffered() const;

 private:
  std::string m_buffer;
  size_t m_consumed = 0;  // bytes of m_buffer already decoded
  std::optional<Error> m_error;
};

// Decodes exactly one payload of the given type (no frame header). Exposed for
// tests and the fuzzer; FrameReader uses it.
Result<Message> decode_payload(uint8_t type, const char* data, size_t n);

}  // namespace ccpool::ipc
