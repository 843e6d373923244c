// One Python worker process of the node pool, in its own process group (so its
// ptxas and other children go with it), talking over a socketpair that is its
// fd 3 (worker_wire.h), stdout and stderr into the service's log. Either the
// service spawned it (start()), or a zygote forked it (adopt(): the zygote is
// its parent, and the only one that may reap it and kill its group; see
// zygote.h). Blocking calls take a deadline and are meant for the one thread
// that owns the worker (WorkerPool gives each worker a thread).
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
  static constexpr int kUnknownStatus = -1;  // an adopted worker whose parent could not reap it
  int status = 0;                            // wait status (WIFEXITED / WIFSIGNALED)
  int64_t max_rss_kb = 0;                    // ru_maxrss of the worker
  std::string describe() const;              // "exited 1", "killed by signal 9"
};

// The parent of a worker the service did not start itself (a zygote).
class WorkerParent {
 public:
  virtual ~WorkerParent() = default;
  // Kills what is left in the exited worker's process group and reaps it.
  // nullopt: the parent could not (it is gone; its orphans went to init).
  virtual std::optional<WorkerExit> reap_child(pid_t pid) = 0;
};

class WorkerProcess {
 public:
  static Result<std::unique_ptr<WorkerProcess>> start(const WorkerSpawn& spawn);
  // A worker that `parent` started: `pidfd` must have been opened while the
  // parent still held it unreaped.
  static std::unique_ptr<WorkerProcess> adopt(pid_t pid, UniqueFd pidfd, UniqueFd channel,
                                              std::shared_ptr<WorkerParent> parent);
  ~WorkerProcess();  // kills and reaps a worker still running
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  pid_t pid() const { return m_pid; }
  Result<void> send(WorkerFrameKind kind, uint64_t job_id, std::string_view payload,
                    std::optional<Clock::time_point> deadline, int pass_fd = -1);
  Result<WorkerFrame> receive(std::optional<Clock::time_point> deadline);
  // SIGKILL to the worker's process group (an adopted worker: to the worker;
  // its parent kills the group when it reaps it). Idempotent, any thread.
  void kill();
  // Waits up to `grace` for the worker to exit on its own, kills it (its
  // whole process group) if it has not, and reaps it. Once.
  WorkerExit reap(std::chrono::milliseconds grace = std::chrono::milliseconds(0));
  // VmRSS of the worker now, kB (0 once it is gone).
  int64_t rss_kb() const;

 private:
  WorkerProcess(pid_t pid, UniqueFd pidfd, UniqueFd channel,
                std::shared_ptr<WorkerParent> parent = nullptr)
      : m_pid(pid),
        m_pidfd(std::move(pidfd)),
        m_channel(std::move(channel)),
        m_parent(std::move(parent)) {}
  WorkerExit reap_adopted(std::chrono::milliseconds grace);
  const pid_t m_pid;
  UniqueFd m_pidfd;
  UniqueFd m_channel;
  const std::shared_ptr<WorkerParent> m_parent;  // null: the service's own child
  mutable Mutex m_mutex;
  bool m_reaped GUARDED_BY(m_mutex) = false;
};

}  // namespace ccpool::workers
