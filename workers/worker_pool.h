// WorkerPool: Inductor's compile workers for every rank of the node, in one
// pool bounded by the node's Scheduler (docs/inductor-workers.md).
//
// A job is one pickled callable a rank would have given its own compile
// workers (SubprocPool.submit). It runs in a warm worker of its Environment,
// admitted by the Scheduler (class "python worker", bucket = the rank), so
// jobs and compiler processes share one bound and one memory budget; a job
// holds its slot from dispatch to result. The estimate a job class learns is
// the worker's peak RSS, ptxas and other children included.
//
// Workers: at most max_workers live processes (with zygotes, plus one zygote
// per environment that has workers); a worker of another
// Environment is retired (and has exited) before a new one starts, so the
// bound holds at every instant. Idle workers exit after idle_timeout. Each
// worker has one thread of this pool that talks to it (blocking I/O with
// deadlines); no oneTBB thread ever waits for a worker.
//
// Single flight: jobs with the same non-empty flight key never run at the same
// time. The first is the leader; the others follow: they run once the leader
// ended (then in parallel), and their compiles are cache hits (Triton's cache,
// backed by the node store). A leader that fails or is cancelled hands the
// lead to its first follower. The key only orders work: what a job returns is
// always its own worker's result.
//
// Callbacks: `done` runs exactly once per submitted job, unless the job was
// cancelled first, on any thread, with no lock of the pool held.
//
// Thread-safety: every member may be called from any thread. shutdown() (or
// the destructor) must run before the Scheduler is destroyed.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "workers/environment.h"

namespace ccpool::pool {
class Scheduler;
}

namespace ccpool::workers {

struct WorkerPoolOptions {
  int max_workers = 1;  // live worker processes at most (the node's jobs)
  std::chrono::milliseconds idle_timeout{60'000};    // an idle worker exits after this
  std::chrono::milliseconds start_timeout{300'000};  // from spawn to the worker's hello
  std::chrono::milliseconds job_timeout{
      0};                                // 0: none; a job past it fails and its worker is killed
  std::vector<std::string> worker_argv;  // after the interpreter: e.g. {"-m", "ccpool._worker"}
  // Workers are forked from one zygote per environment (zygote.h), started
  // with worker_argv, the environment's args and "--zygote=1"; otherwise
  // each worker is an interpreter of its own.
  bool zygotes = false;
  int output_fd = 2;  // workers' stdout and stderr
  // Tests only: runs on a worker's thread, without the pool's lock, when a
  // job's result has arrived and before the pool takes it (a cancel() there
  // is the race between a result and a kill).
  std::function<void(uint64_t job_id)> result_arrived_for_test;
};

enum class JobStatus : uint8_t { kDone = 0, kFailed = 1 };

struct JobResult {
  JobStatus status = JobStatus::kDone;
  bool followed = false;  // ran after the leader of its flight
  std::string payload;    // the worker's pickled result (kDone)
  std::string message;    // why (kFailed)
};

struct WorkerPoolStats {
  size_t workers = 0, busy = 0, starting = 0, waiting_for_worker = 0, following = 0;
  size_t peak_workers = 0;
  uint64_t spawned = 0, warmed = 0, exited = 0, jobs_done = 0, jobs_failed = 0, followed = 0,
           cancelled = 0;
  uint64_t killed = 0;                       // workers killed with a cancelled or timed-out job
  uint64_t zygotes_started = 0, forked = 0;  // forked: workers a zygote started
  int64_t rss_kb = 0;                        // VmRSS of the live workers now, summed
  std::map<std::string, uint64_t> counts;    // summed "counts" of the workers' result stats
};

class WorkerPool {
 public:
  using Done = std::function<void(JobResult)>;

  WorkerPool(WorkerPoolOptions options, pool::Scheduler& scheduler);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Returns a job id (never 0). A pool that is stopping answers kFailed at once.
  uint64_t submit(std::shared_ptr<const Environment> env, uint64_t bucket, std::string flight_key,
                  std::string payload, Done done);
  // Answers `done` (kDone, empty payload) once a worker of `env` has started
  // (at once when one has), without taking a slot: Inductor's readiness
  // probe, which must not queue behind other ranks' compiles. Warms one.
  // Cancellable with cancel().
  uint64_t await_ready(std::shared_ptr<const Environment> env, Done done);
  // Starts a worker of `env` ahead of its first job (a rank opened its pool)
  // when none of `env` is alive and the bound has room; otherwise nothing.
  void warm(std::shared_ptr<const Environment> env);
  // The requester is gone: the job leaves the queue, or its worker is killed.
  // Its `done` never runs after this returns. Returns what the job was doing,
  // for the log: "queued", "following job 7", "waiting for a worker",
  // "awaiting readiness", "running in worker pid 123 (killed)", "ended".
  std::string cancel(uint64_t job_id);
  // Retires workers idle longer than idle_timeout and joins finished threads.
  void tick();
  WorkerPoolStats stats() const;
  int max_workers() const;
  // Kills every worker, answers every job kFailed ("stopping"), joins threads.
  void shutdown();

  struct State;

 private:
  std::shared_ptr<State> m_state;
};

}  // namespace ccpool::workers
