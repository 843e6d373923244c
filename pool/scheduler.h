// Scheduler: the ONE bounded, memory-aware, fair pool of a node.
//
// It admits jobs (tool processes) and runs CPU work in one tbb::task_arena of
// `jobs` threads, and short request work (run_request) on `jobs` plain
// threads of its own. A job occupies a slot from admission until finish(); its
// process is waited for by ProcessRunner's reaper thread, never by an arena
// thread, so the bound counts processes, not parked threads.
//
// Admission: running < jobs, and (running == 0 || reserved + estimate(class) <= mem_budget).
// With nothing running one job is always admitted, so a class whose estimate
// exceeds the budget still makes progress (one at a time).
// Order: FIFO within a client, round-robin across clients with queued jobs.
// When the head job of the next client does not fit the memory budget, the
// scheduler waits for memory rather than skipping to a smaller job, so big jobs
// cannot starve.
//
// Estimates per job class: the estimate is the largest of the last 8 measured
// peaks of that class (kB -> bytes); before the first sample it is
// default_estimate. A sample of 0 (start failed, unknown) is not learned.
//
// Thread-safety: every member may be called from any thread, including from
// inside `start` and from ProcessRunner's on_exit. Destroy or terminate_all()
// the ProcessRunner before the Scheduler, so no on_exit calls finish() on a
// destroyed scheduler.
//
// Exceptions: `start` and arena work should not throw. If one does, the
// exception never reaches oneTBB: it is counted (stats().exceptions) and the
// caller's `on_exception(what)` runs on the same thread, so every request still
// gets an answer. A `start` that throws has its slot freed (finish(id, 0)) first.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace ccpool::pool {

struct SchedulerOptions {
  int jobs = 0;             // 0: available_cpus()
  uint64_t mem_budget = 0;  // bytes; 0: min(80% MemAvailable, cgroup memory.max if set)
  uint64_t default_estimate = 512ull << 20;  // bytes, for a class with no measured peak yet
};

using JobId = uint64_t;

struct SchedulerStats {
  int jobs;
  uint64_t mem_budget;
  size_t running, queued, peak_running;
  uint64_t reserved_bytes;  // sum of the estimates of running jobs
  uint64_t exceptions;      // `start` or arena work that threw (each got its on_exception)
};

class Scheduler {
 public:
  explicit Scheduler(
      const SchedulerOptions&);  // creates a tbb::task_arena with max_concurrency = jobs
  ~Scheduler();                  // waits for arena work to finish; queued jobs are dropped silently
  // The destructor also lets the request threads finish what is queued.
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queue a job for client `client_id` of class `job_class` (e.g. "g++ -O3 -shared").
  // When admitted, `start` runs inside the arena. `start` must spawn the process
  // (non-blocking) and later someone must call finish(id, rss) exactly once when
  // the process ends (or finish(id, 0) if start failed).
  // on_exception: see "Exceptions" above.
  JobId submit(uint64_t client_id, const std::string& job_class, std::function<void(JobId)> start,
               std::function<void(const std::string& what)> on_exception = {});

  // Removes a job that has not started; false if it already started/finished.
  bool cancel_queued(JobId id);

  // Frees the slot, learns the class estimate from measured_peak_rss_kb, admits more.
  void finish(JobId id, int64_t measured_peak_rss_kb);

  // Enqueue CPU work (hashing, compression, store writes) into the same bounded
  // arena; returns at once.
  void run_in_arena(std::function<void()> work,
                    std::function<void(const std::string& what)> on_exception = {});

  // Enqueue short work that never waits for a tool the pool runs (a request's
  // planning, lookup and hit delivery); returns at once. It runs FIFO on
  // `jobs` request threads that sleep on a condition variable when idle: an
  // arena task wakes oneTBB workers that yield-spin before sleeping (~100
  // sched_yield per task), which on a small machine costs a hit more than the
  // hit itself. Exceptions as for arena work.
  void run_request(std::function<void()> work,
                   std::function<void(const std::string& what)> on_exception = {});

  uint64_t estimate(const std::string& job_class) const;  // bytes
  SchedulerStats stats() const;

  // For shutdown: drop every queued job, calling on_dropped for each (outside the lock).
  void drain_queued(std::function<void(JobId)> on_dropped);

 private:
  struct State;
  std::unique_ptr<State> m_state;
};

// The service's default memory budget (the default jobs: available_cpus(),
// base/process_facts.h):
uint64_t default_mem_budget();  // min(0.8 * MemAvailable, cgroup v2 memory.max or v1 limit if set)

}  // namespace ccpool::pool
