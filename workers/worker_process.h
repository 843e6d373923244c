// One Python worker process of the node pool: spawned by the service in its
// own process group (so its ptxas and other children go with it), talking
// over a socketpair that is its fd 3 (worker_wire.h), stdout and stderr into
// the service's log. Blocking calls take a deadline and are meant for the one
// thread that owns the worker (WorkerPool gives each worker a thread).
//
// Thread-safety: kill() may be called from any thread at any time; every
// other member only from the owning thread.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/fs.h"
#include "base/thread_annotations.h"
#include "workers/worker_wire.h"

namespace ccpool::workers {

struct WorkerSpawn {
  std::string python;             // absolute
  std::vector<std::string> argv;  // argv[0] included
  std::vector<std::string> env;
  std::string cwd;
  int output_fd = 2;  // the worker's stdout and stderr
};

struct WorkerExit {
  int status = 0;                // wait status (WIFEXITED / WIFSIGNALED)
  int64_t max_rss_kb = 0;        // ru_maxrss of the worker
  std::string describe() const;  // "exited 1", "killed by signal 9"
};

class WorkerProcess {
 public:
  static Result<std::unique_ptr<WorkerProcess>> start(const WorkerSpawn& spawn);
  ~WorkerProcess();  // kills and reaps a worker still running
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  pid_t pid() const { return m_pid; }
  Result<void> send(WorkerFrameKind kind, uint64_t job_id, std::string_view payload,
                    std::optional<Clock::time_point> deadline);
  Result<WorkerFrame> receive(std::optional<Clock::time_point> deadline);
  // SIGKILL to the worker's process group. Idempotent, any thread.
  void kill();
  // Waits up to `grace` for the worker to exit on its own, kills it (its
  // whole process group) if it has not, and reaps it. Once.
  WorkerExit reap(std::chrono::milliseconds grace = std::chrono::milliseconds(0));
  // VmRSS of the worker now, kB (0 once it is gone).
  int64_t rss_kb() const;

 private:
  WorkerProcess(pid_t pid, UniqueFd pidfd, UniqueFd channel)
      : m_pid(pid), m_pidfd(std::move(pidfd)), m_channel(std::move(channel)) {}
  const pid_t m_pid;
  UniqueFd m_pidfd;
  UniqueFd m_channel;
  mutable Mutex m_mutex;
  bool m_reaped GUARDED_BY(m_mutex) = false;
};

}  // namespace ccpool::workers
