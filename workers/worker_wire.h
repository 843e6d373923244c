// The frames between the service and one of its Python workers, over the
// socketpair that is the worker's fd 3 (python/ccpool/_worker.py is the other
// end). Little-endian; the byte layout, in the order it is sent:
//
//   frame   = kind:u8 0:u8 0:u16 job_id:u64 length:u32 payload   ; 16-byte header
//   kind    = 1 hello   W->S  payload: JSON {"pid", "python", "torch", "triton"}
//           | 2 job     S->W  payload: the pickled job, as the rank sent it
//           | 3 result  W->S  payload: stats_len:u32, stats (JSON), the pickled result
//           | 4 exit    S->W  empty: finish and exit
//   and between the service and a zygote (workers/zygote.h), on the zygote's fd 3:
//           | 5 fork    S->Z  empty; the new worker's channel travels with it (SCM_RIGHTS)
//           | 6 forked  Z->S  job_id = the fork's; payload: JSON {"pid"} or {"error"}
//           | 7 reap    S->Z  job_id = the worker's pid: kill its process group, reap it
//           | 8 reaped  Z->S  job_id = that pid; payload: JSON {"status", "rss_kb"} or {"error"}
//   length <= kMaxWorkerPayload
//
// A worker is the service's own child, but it runs the user's code (the jobs
// unpickle arbitrary objects), so every frame it sends is bounded and checked
// like any other input from outside.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"

namespace ccpool::workers {

inline constexpr uint32_t kMaxWorkerPayload = (64u << 20) + (64u << 10);
inline constexpr size_t kWorkerHeaderSize = 16;

enum class WorkerFrameKind : uint8_t {
  kHello = 1,
  kJob = 2,
  kResult = 3,
  kExit = 4,
  kFork = 5,
  kForked = 6,
  kReap = 7,
  kReaped = 8,
};

struct WorkerFrame {
  WorkerFrameKind kind = WorkerFrameKind::kHello;
  uint64_t job_id = 0;
  std::string payload;
};

using Clock = std::chrono::steady_clock;

std::string encode_worker_frame(WorkerFrameKind kind, uint64_t job_id, std::string_view payload);

// Blocking I/O on a stream socket, bounded by `deadline` (nullopt: none).
// Errors: kUnreachable when the worker closed its end (it exited), kTimeout,
// kProtocol for a frame that breaks the grammar, kIo for anything else.
// With pass_fd >= 0, that descriptor travels with the frame's first bytes
// (SCM_RIGHTS): a fork frame carries the new worker's channel this way.
Result<void> write_worker_frame(int fd, WorkerFrameKind kind, uint64_t job_id,
                                std::string_view payload, std::optional<Clock::time_point> deadline,
                                int pass_fd = -1);
Result<WorkerFrame> read_worker_frame(int fd, std::optional<Clock::time_point> deadline);

// A result frame's payload split into its stats JSON and the pickled result.
struct ResultPayload {
  std::string stats_json;
  std::string pickled;
};
Result<ResultPayload> split_result(std::string payload);

}  // namespace ccpool::workers
