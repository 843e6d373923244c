// See worker_wire.h for the byte layout.
#include "workers/worker_wire.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "base/unix_socket.h"

namespace ccpool::workers {
namespace {

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

uint64_t get_le(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

// Waits until fd is ready for `events` or the deadline passes.
Result<void> wait_ready(int fd, short events, std::optional<Clock::time_point> deadline) {
  while (true) {
    int timeout_ms = -1;
    if (deadline) {
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now()).count();
      if (left <= 0) return make_error(ErrorCode::kTimeout, "the worker did not answer in time");
      timeout_ms = static_cast<int>(std::min<int64_t>(left, 60'000));
    }
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, timeout_ms);
    if (n > 0) return ok();
    if (n < 0 && errno != EINTR)
      return make_error(ErrorCode::kIo, std::string("poll: ") + std::strerror(errno));
  }
}

Result<void> read_exact(int fd, char* out, size_t n, std::optional<Clock::time_point> deadline) {
  size_t got = 0;
  while (got < n) {
    CCPOOL_TRY(wait_ready(fd, POLLIN, deadline));
    ssize_t r = ::recv(fd, out + got, n - got, MSG_DONTWAIT);
    if (r > 0) {
      got += static_cast<size_t>(r);
    } else if (r == 0 || (r < 0 && (errno == ECONNRESET || errno == EPIPE))) {
      return make_error(ErrorCode::kUnreachable, "the worker closed its channel (it exited)");
    } else if (errno != EAGAIN && errno != EINTR) {
      return make_error(ErrorCode::kIo, std::string("recv from a worker: ") + std::strerror(errno));
    }
  }
  return ok();
}

}  // namespace

std::string encode_worker_frame(WorkerFrameKind kind, uint64_t job_id, std::string_view payload) {
  std::string out;
  out.reserve(kWorkerHeaderSize + payload.size());
  put_le(out, static_cast<uint8_t>(kind), 1);
  put_le(out, 0, 3);
  put_le(out, job_id, 8);
  put_le(out, payload.size(), 4);
  out.append(payload);
  return out;
}

Result<void> write_worker_frame(int fd, WorkerFrameKind kind, uint64_t job_id,
                                std::string_view payload, std::optional<Clock::time_point> deadline,
                                int pass_fd) {
  if (payload.size() > kMaxWorkerPayload) {
    return make_error(ErrorCode::kFull, "a " + std::to_string(payload.size()) +
                                            "-byte job is over the " +
                                            std::to_string(kMaxWorkerPayload) + "-byte bound");
  }
  std::string frame = encode_worker_frame(kind, job_id, payload);
  size_t sent = 0;
  while (sent < frame.size()) {
    CCPOOL_TRY(wait_ready(fd, POLLOUT, deadline));
    ssize_t w;
    if (sent == 0 && pass_fd >= 0) {  // the descriptor rides on the first bytes
      w = send_with_fd(fd, frame, pass_fd, MSG_NOSIGNAL | MSG_DONTWAIT);
    } else {
      w = ::send(fd, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    if (w > 0) {
      sent += static_cast<size_t>(w);
    } else if (w < 0 && (errno == EPIPE || errno == ECONNRESET)) {
      return make_error(ErrorCode::kUnreachable, "the worker closed its channel (it exited)");
    } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
      return make_error(ErrorCode::kIo, std::string("send to a worker: ") + std::strerror(errno));
    }
  }
  return ok();
}

Result<WorkerFrame> read_worker_frame(int fd, std::optional<Clock::time_point> deadline) {
  char header[kWorkerHeaderSize];
  CCPOOL_TRY(read_exact(fd, header, sizeof header, deadline));
  auto kind = static_cast<uint8_t>(header[0]);
  if (kind < 1 || kind > 8 || header[1] != 0 || header[2] != 0 || header[3] != 0) {
    return make_error(ErrorCode::kProtocol,
                      "a worker sent a malformed frame header (kind " + std::to_string(kind) + ")");
  }
  WorkerFrame frame;
  frame.kind = static_cast<WorkerFrameKind>(kind);
  frame.job_id = get_le(header + 4, 8);
  uint64_t length = get_le(header + 12, 4);
  if (length > kMaxWorkerPayload) {
    return make_error(ErrorCode::kProtocol, "a worker declared a " + std::to_string(length) +
                                                "-byte frame, over the bound of " +
                                                std::to_string(kMaxWorkerPayload));
  }
  // Grown as bytes arrive, never sized from the declared length up front.
  constexpr size_t kChunk = 1 << 20;
  while (frame.payload.size() < length) {
    size_t n = std::min<size_t>(kChunk, length - frame.payload.size());
    size_t at = frame.payload.size();
    frame.payload.resize(at + n);
    CCPOOL_TRY(read_exact(fd, frame.payload.data() + at, n, deadline));
  }
  return frame;
}

Result<ResultPayload> split_result(std::string payload) {
  if (payload.size() < 4)
    return make_error(ErrorCode::kProtocol, "a worker's result has no stats length");
  uint64_t stats_len = get_le(payload.data(), 4);
  if (stats_len > payload.size() - 4 || stats_len > (64u << 10)) {
    return make_error(ErrorCode::kProtocol, "a worker's result declares " +
                                                std::to_string(stats_len) +
                                                " stats bytes (bound 64 KiB, the frame's size)");
  }
  ResultPayload out;
  out.stats_json = payload.substr(4, stats_len);
  payload.erase(0, 4 + stats_len);
  out.pickled = std::move(payload);
  return out;
}

}  // namespace ccpool::workers
