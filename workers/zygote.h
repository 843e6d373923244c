// A zygote: one Python process per worker Environment that sets itself up
// once, as Inductor's compile_worker sidecar does before it forks its pool
// (torch and Triton imported, triton_key() computed, the device properties
// cached), and then forks the environment's workers on request. A worker then
// costs a fork instead of an interpreter start and those imports, several
// CPU-seconds each on a GPU node (docs/inductor-workers.md, "Zygotes").
//
// The zygote is the forked workers' parent: it reaps nothing until the
// service asks (reap frame), so a worker's pid, and the process group it
// leads, cannot be reused while the service may still signal it. Its workers
// die with it (PR_SET_PDEATHSIG), and each WorkerProcess it forked holds it
// alive. Every answer it sends is checked: the pid it names must be its own
// child.
//
// Thread-safety: every member may be called from any thread; requests are
// serialised on the zygote's one channel.
#pragma once

#include <sys/types.h>

#include <memory>

#include "base/error.h"
#include "base/thread_annotations.h"
#include "workers/worker_process.h"

namespace ccpool::workers {

class Zygote : public WorkerParent, public std::enable_shared_from_this<Zygote> {
 public:
  // Spawns `spawn` (its argv already asks for zygote mode); then
  // await_hello() until it has set itself up.
  static Result<std::shared_ptr<Zygote>> spawn(const WorkerSpawn& spawn);
  Result<void> await_hello(Clock::time_point deadline);
  // SIGKILL to the zygote (its workers die with it). Any thread, any time.
  void kill() { m_process->kill(); }
  // It stopped answering, or answered out of turn: it has been killed, and
  // a new one should take its place.
  bool broken();
  ~Zygote() override;  // asks it to exit, then reaps it (it has no workers left)
  Zygote(const Zygote&) = delete;
  Zygote& operator=(const Zygote&) = delete;

  // A new worker, forked; it greets on its channel as a spawned one does.
  Result<std::unique_ptr<WorkerProcess>> fork_worker(Clock::time_point deadline);
  std::optional<WorkerExit> reap_child(pid_t pid) override;
  pid_t pid() const { return m_process->pid(); }

 private:
  explicit Zygote(std::unique_ptr<WorkerProcess> process) : m_process(std::move(process)) {}
  // One request and its answer, whose job id must be `id`. A failure breaks it.
  Result<WorkerFrame> call(WorkerFrameKind kind, uint64_t id, WorkerFrameKind answer,
                           Clock::time_point deadline, int pass_fd = -1) REQUIRES(m_mutex);
  void break_locked() REQUIRES(m_mutex);

  const std::unique_ptr<WorkerProcess> m_process;
  Mutex m_mutex;
  uint64_t m_next_fork GUARDED_BY(m_mutex) = 1;
  // Its channel failed or it broke the protocol: killed, it answers no more.
  bool m_broken GUARDED_BY(m_mutex) = false;
};

}  // namespace ccpool::workers
