#include "pool/scheduler.h"

#include <tbb/global_control.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <list>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/process_facts.h"
#include "base/thread_annotations.h"

namespace ccpool::pool {
namespace {

constexpr size_t kEstimateWindow = 8;  // a class's estimate: the max of its last 8 peaks

using OnException = std::function<void(const std::string& what)>;

struct QueuedJob {
  JobId id;
  std::string job_class;
  std::function<void(JobId)> start;
  OnException on_exception;
};

struct RunningJob {
  std::string job_class;
  uint64_t reserved;  // the estimate charged at admission, returned on finish
};

struct AdmittedJob {
  JobId id;
  std::function<void(JobId)> start;
  OnException on_exception;
};
using Admitted = std::vector<AdmittedJob>;

// The text of the exception in flight (inside a catch block).
std::string current_exception_text() {
  try {
    throw;
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown exception";
  }
}

}  // namespace

struct Scheduler::State {
  int jobs = 1;
  uint64_t mem_budget = 0;
  uint64_t default_estimate = 0;
  // Lets the arena really get `jobs` threads on a machine with fewer cores:
  // oneTBB's default worker count is cores - 1.
  std::unique_ptr<tbb::global_control> parallelism;
  tbb::task_arena arena;

  mutable Mutex mutex;
  // Each client's FIFO; `ring` holds the clients with a non-empty queue in
  // round-robin order (front = next to be served).
  std::unordered_map<uint64_t, std::deque<QueuedJob>> queues GUARDED_BY(mutex);
  std::list<uint64_t> ring GUARDED_BY(mutex);
  std::unordered_map<JobId, uint64_t> queued_owner GUARDED_BY(mutex);  // queued job -> client
  std::unordered_map<JobId, RunningJob> running GUARDED_BY(mutex);
  std::unordered_map<std::string, std::deque<uint64_t>> peaks
      GUARDED_BY(mutex);  // class -> recent peaks, bytes
  uint64_t reserved GUARDED_BY(mutex) = 0;
  size_t peak_running GUARDED_BY(mutex) = 0;
  JobId next_id GUARDED_BY(mutex) = 1;

  // Arena tasks not yet returned, for the destructor.
  Mutex arena_mutex;
  CondVar arena_idle{&arena_mutex};
  size_t arena_pending GUARDED_BY(arena_mutex) = 0;
  std::atomic<uint64_t> exceptions{0};

  // Request threads: a FIFO, served by `jobs` threads until `requests_done`.
  Mutex request_mutex;
  CondVar request_ready{&request_mutex};
  std::deque<std::pair<std::function<void()>, OnException>> requests GUARDED_BY(request_mutex);
  bool requests_done GUARDED_BY(request_mutex) = false;
  std::vector<std::thread> request_threads;

  uint64_t estimate_locked(const std::string& job_class) const REQUIRES(mutex);
  Admitted admit_locked() REQUIRES(mutex);
  void launch(Admitted admitted, Scheduler& owner);
  void post(std::function<void()> work, OnException on_exception);
  void serve_requests();
  // Runs `work`; an exception is counted and handed to on_exception, whose
  // own exception is dropped.
  void run_guarded(const std::function<void()>& work, const OnException& on_exception);
  void task_returned() {
    MutexLock lock(&arena_mutex);
    if (--arena_pending == 0) arena_idle.signal_all();
  }
};

uint64_t Scheduler::State::estimate_locked(const std::string& job_class) const {
  auto it = peaks.find(job_class);
  if (it == peaks.end() || it->second.empty()) return default_estimate;
  return *std::max_element(it->second.begin(), it->second.end());
}

// Admits in round-robin order while a slot is free. When the next client's
// head job does not fit in memory, admission stops until a finish() frees
// memory: skipping ahead to smaller jobs could starve a big one forever.
Admitted Scheduler::State::admit_locked() {
  Admitted admitted;
  while (running.size() < static_cast<size_t>(jobs) && !ring.empty()) {
    uint64_t client = ring.front();
    std::deque<QueuedJob>& queue = queues[client];
    QueuedJob& head = queue.front();
    uint64_t need = estimate_locked(head.job_class);
    if (!running.empty() && reserved + need > mem_budget) break;
    running.emplace(head.id, RunningJob{head.job_class, need});
    reserved += need;
    peak_running = std::max(peak_running, running.size());
    queued_owner.erase(head.id);
    admitted.push_back(AdmittedJob{head.id, std::move(head.start), std::move(head.on_exception)});
    queue.pop_front();
    ring.pop_front();
    if (queue.empty()) {
      queues.erase(client);
    } else {
      ring.push_back(client);
    }
  }
  return admitted;
}

void Scheduler::State::run_guarded(const std::function<void()>& work,
                                   const OnException& on_exception) {
  try {
    work();
  } catch (...) {
    ++exceptions;
    try {
      std::string what = current_exception_text();
      if (on_exception) on_exception(what);
    } catch (...) {
    }
  }
}

// An exception must not reach oneTBB (it would terminate the worker).
void Scheduler::State::post(std::function<void()> work, OnException on_exception) {
  {
    MutexLock lock(&arena_mutex);
    ++arena_pending;
  }
  arena.enqueue([this, work = std::move(work), on_exception = std::move(on_exception)] {
    struct Returned {  // counts the task out however it returns
      State* state;
      ~Returned() { state->task_returned(); }
    } returned{this};
    run_guarded(work, on_exception);
  });
}

// One request thread: takes the oldest request, sleeps when there is none,
// returns once the queue is empty and requests_done is set.
void Scheduler::State::serve_requests() {
  for (;;) {
    std::pair<std::function<void()>, OnException> request;
    {
      MutexLock lock(&request_mutex);
      while (requests.empty() && !requests_done) request_ready.wait();
      if (requests.empty()) return;
      request = std::move(requests.front());
      requests.pop_front();
    }
    run_guarded(request.first, request.second);
  }
}

void Scheduler::State::launch(Admitted admitted, Scheduler& owner) {
  for (AdmittedJob& job : admitted) {
    OnException on_exception = std::move(job.on_exception);
    post([id = job.id, start = std::move(job.start)] { start(id); },
         [&owner, id = job.id, on_exception = std::move(on_exception)](const std::string& what) {
           owner.finish(id, 0);
           if (on_exception) on_exception(what);
         });
  }
}

Scheduler::Scheduler(const SchedulerOptions& options) : m_state(std::make_unique<State>()) {
  State& s = *m_state;
  s.jobs = options.jobs > 0 ? options.jobs : available_cpus();
  s.mem_budget = options.mem_budget > 0 ? options.mem_budget : default_mem_budget();
  s.default_estimate = options.default_estimate;
  size_t want = static_cast<size_t>(s.jobs) + 1;
  if (tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism) < want) {
    s.parallelism =
        std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, want);
  }
  // No slot reserved for external threads: every slot serves enqueued work.
  s.arena.initialize(s.jobs, 0);
  for (int i = 0; i < s.jobs; ++i) s.request_threads.emplace_back([&s] { s.serve_requests(); });
}

Scheduler::~Scheduler() {
  State& s = *m_state;
  {
    MutexLock lock(&s.request_mutex);
    s.requests_done = true;
    s.request_ready.signal_all();
  }
  for (std::thread& t : s.request_threads) t.join();  // after the queued requests ran
  {
    MutexLock lock(&s.mutex);
    s.queues.clear();
    s.ring.clear();
    s.queued_owner.clear();
  }
  MutexLock lock(&s.arena_mutex);
  while (s.arena_pending != 0) s.arena_idle.wait();
}

JobId Scheduler::submit(uint64_t client_id, const std::string& job_class,
                        std::function<void(JobId)> start, OnException on_exception) {
  State& s = *m_state;
  Admitted admitted;
  JobId id;
  {
    MutexLock lock(&s.mutex);
    id = s.next_id++;
    std::deque<QueuedJob>& queue = s.queues[client_id];
    if (queue.empty()) s.ring.push_back(client_id);
    queue.push_back(QueuedJob{id, job_class, std::move(start), std::move(on_exception)});
    s.queued_owner.emplace(id, client_id);
    admitted = s.admit_locked();
  }
  s.launch(std::move(admitted), *this);
  return id;
}

bool Scheduler::cancel_queued(JobId id) {
  State& s = *m_state;
  std::function<void(JobId)> dropped;  // destroyed outside the lock
  MutexLock lock(&s.mutex);
  auto owner = s.queued_owner.find(id);
  if (owner == s.queued_owner.end()) return false;
  uint64_t client = owner->second;
  s.queued_owner.erase(owner);
  std::deque<QueuedJob>& queue = s.queues[client];
  auto it =
      std::find_if(queue.begin(), queue.end(), [id](const QueuedJob& j) { return j.id == id; });
  dropped = std::move(it->start);
  queue.erase(it);
  if (queue.empty()) {
    s.queues.erase(client);
    s.ring.remove(client);
  }
  return true;
}

void Scheduler::finish(JobId id, int64_t measured_peak_rss_kb) {
  State& s = *m_state;
  Admitted admitted;
  {
    MutexLock lock(&s.mutex);
    auto it = s.running.find(id);
    if (it == s.running.end()) return;  // unknown or finished twice: ignore
    s.reserved -= it->second.reserved;
    if (measured_peak_rss_kb > 0) {
      std::deque<uint64_t>& history = s.peaks[it->second.job_class];
      history.push_back(static_cast<uint64_t>(measured_peak_rss_kb) * 1024);
      if (history.size() > kEstimateWindow) history.pop_front();
    }
    s.running.erase(it);
    admitted = s.admit_locked();
  }
  s.launch(std::move(admitted), *this);
}

void Scheduler::run_in_arena(std::function<void()> work, OnException on_exception) {
  m_state->post(std::move(work), std::move(on_exception));
}

void Scheduler::run_request(std::function<void()> work, OnException on_exception) {
  State& s = *m_state;
  MutexLock lock(&s.request_mutex);
  s.requests.emplace_back(std::move(work), std::move(on_exception));
  s.request_ready.signal();
}

uint64_t Scheduler::estimate(const std::string& job_class) const {
  MutexLock lock(&m_state->mutex);
  return m_state->estimate_locked(job_class);
}

SchedulerStats Scheduler::stats() const {
  const State& s = *m_state;
  MutexLock lock(&s.mutex);
  return SchedulerStats{s.jobs,         s.mem_budget, s.running.size(),   s.queued_owner.size(),
                        s.peak_running, s.reserved,   s.exceptions.load()};
}

void Scheduler::drain_queued(std::function<void(JobId)> on_dropped) {
  State& s = *m_state;
  std::vector<JobId> dropped;
  std::vector<std::function<void(JobId)>> starts;  // destroyed outside the lock
  {
    MutexLock lock(&s.mutex);
    // Report in submission order per client, clients in ring order.
    for (uint64_t client : s.ring) {
      for (QueuedJob& job : s.queues[client]) {
        dropped.push_back(job.id);
        starts.push_back(std::move(job.start));
      }
    }
    s.queues.clear();
    s.ring.clear();
    s.queued_owner.clear();
  }
  if (on_dropped) {
    for (JobId id : dropped) on_dropped(id);
  }
}

}  // namespace ccpool::pool
