// See worker_pool.h. One mutex (State::mutex) guards every job and worker
// record; worker threads block on the channel with it released; callbacks
// (`done`, Scheduler::finish, Scheduler::submit) run with it released.
#include "workers/worker_pool.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <list>
#include <nlohmann/json.hpp>
#include <thread>
#include <unordered_map>

#include "base/thread_annotations.h"
#include "pool/scheduler.h"
#include "workers/worker_process.h"
#include "workers/zygote.h"

namespace ccpool::workers {
namespace {

constexpr const char* kJobClass = "python worker";

}  // namespace

struct Worker {
  enum class Phase { kStarting, kIdle, kBusy, kRetiring, kDead };
  Worker(uint64_t worker_id, std::shared_ptr<const Environment> environment, Mutex* mutex)
      : id(worker_id), env(std::move(environment)), wake(mutex) {}
  const uint64_t id;
  const std::shared_ptr<const Environment> env;
  // Set once by its thread, under State::mutex (null until the process is
  // made: spawned, or forked by the environment's zygote).
  std::unique_ptr<WorkerProcess> process;
  std::thread thread;
  CondVar wake;  // bound to State::mutex
  // Guarded by State::mutex:
  Phase phase = Phase::kStarting;
  uint64_t job = 0;          // the job it runs (or will, once started); 0: none
  bool killed = false;       // cancel() killed its process: it must not take another job
  bool thread_done = false;  // its thread has nothing left to do: join() does not wait
  Clock::time_point idle_since = Clock::now();
};

struct Job {
  enum class Phase { kQueued, kFollowing, kWaitingForWorker, kAssigned, kAwaitingReady };
  uint64_t id = 0;
  std::shared_ptr<const Environment> env;
  uint64_t bucket = 0;
  std::string flight_key;
  std::string payload;
  WorkerPool::Done done;
  Phase phase = Phase::kQueued;
  pool::JobId sched_id = 0;
  bool admitted = false;  // holds a scheduler slot
  bool followed = false;
  bool cancelled = false;
  bool leads = false;  // registered in State::flights under flight_key
  std::vector<uint64_t> followers;
};

// The zygote of one environment: the first worker thread that needs it
// starts it, the others wait on `mutex`.
// Lock order: a slot's mutex, then State::mutex (never the other way).
struct ZygoteSlot {
  Mutex mutex;                                       // held while it starts
  std::shared_ptr<Zygote> zygote GUARDED_BY(mutex);  // greeted
  std::atomic<bool> failed{false};                   // it did not start: workers are spawned
  // Guarded by State::mutex: the zygote while it starts, which shutdown()
  // kills (a greeted one stays until its workers are reaped through it).
  std::shared_ptr<Zygote> starting;
};

// What has to happen after the lock is released.
struct Effects {
  std::vector<std::pair<WorkerPool::Done, JobResult>> replies;
  std::vector<pool::JobId> finished_slots;
  std::vector<std::pair<pool::JobId, int64_t>> finished_with_rss;
  std::vector<uint64_t> to_schedule;
};

struct WorkerPool::State : std::enable_shared_from_this<WorkerPool::State> {
  State(WorkerPoolOptions opts, pool::Scheduler& sched)
      : options(std::move(opts)), scheduler(sched) {}

  const WorkerPoolOptions options;
  pool::Scheduler& scheduler;
  mutable Mutex mutex;
  uint64_t next_job GUARDED_BY(mutex) = 1;
  uint64_t next_worker GUARDED_BY(mutex) = 1;
  bool stopping GUARDED_BY(mutex) = false;
  std::unordered_map<uint64_t, std::unique_ptr<Job>> jobs GUARDED_BY(mutex);
  std::unordered_map<std::string, uint64_t> flights GUARDED_BY(mutex);  // flight key -> leader
  std::list<std::unique_ptr<Worker>> workers GUARDED_BY(mutex);  // live and dead (until joined)
  std::deque<uint64_t> waiting_for_worker GUARDED_BY(mutex);
  // environment id -> its zygote, while it has live workers (options.zygotes)
  std::unordered_map<std::string, std::shared_ptr<ZygoteSlot>> zygotes GUARDED_BY(mutex);
  std::vector<uint64_t> awaiting_ready
      GUARDED_BY(mutex);  // await_ready() jobs: no slot, no worker of their own
  WorkerPoolStats stats GUARDED_BY(mutex);

  size_t live_locked() const REQUIRES(mutex) {
    return static_cast<size_t>(std::count_if(workers.begin(), workers.end(), [](const auto& w) {
      return w->phase != Worker::Phase::kDead;
    }));
  }

  void run(Effects& fx) {
    for (auto& [done, result] : fx.replies) done(std::move(result));
    for (pool::JobId id : fx.finished_slots) scheduler.finish(id, 0);
    for (auto& [id, rss] : fx.finished_with_rss) scheduler.finish(id, rss);
    for (uint64_t job_id : fx.to_schedule) schedule(job_id);
  }

  // Puts a job into the scheduler's queue (no lock held).
  void schedule(uint64_t job_id) {
    uint64_t bucket;
    {
      MutexLock lock(&mutex);
      auto it = jobs.find(job_id);
      if (it == jobs.end()) return;
      bucket = it->second->bucket;
    }
    std::weak_ptr<State> weak = weak_from_this();
    pool::JobId sched_id = scheduler.submit(
        bucket, kJobClass,
        [weak, job_id](pool::JobId id) {
          if (auto self = weak.lock()) self->start(job_id, id);
        },
        [weak, job_id](const std::string& what) {
          if (auto self = weak.lock())
            self->fail_job(job_id, "the pool failed to start the job: " + what);
        });
    MutexLock lock(&mutex);
    auto it = jobs.find(job_id);
    if (it != jobs.end()) it->second->sched_id = sched_id;
  }

  // Admitted by the scheduler (an arena thread).
  void start(uint64_t job_id, pool::JobId sched_id) {
    Effects fx;
    {
      MutexLock lock(&mutex);
      auto it = jobs.find(job_id);
      if (it == jobs.end() || it->second->cancelled || stopping) {
        fx.finished_slots.push_back(sched_id);
        if (it != jobs.end()) {
          std::optional<JobResult> answer;
          if (!it->second->cancelled) answer = JobResult{JobStatus::kFailed, false, {}, "stopping"};
          end_job_locked(*it->second, std::move(answer), fx);
        }
      } else {
        Job& job = *it->second;
        job.sched_id = sched_id;
        job.admitted = true;
        assign_locked(job, fx);
      }
    }
    run(fx);
  }

  // A worker for an admitted job: an idle one of its environment, a new one
  // while the bound allows, or (retiring an idle one of another environment)
  // the next one that exits.
  void assign_locked(Job& job, Effects& fx) REQUIRES(mutex) {
    Worker* best = nullptr;
    for (auto& w : workers) {
      if (w->phase == Worker::Phase::kIdle && w->env->id == job.env->id &&
          (!best || w->idle_since > best->idle_since)) {
        best = w.get();
      }
    }
    for (auto& w : workers) {  // else one warming up for this environment
      if (!best && w->phase == Worker::Phase::kStarting && w->job == 0 && w->env->id == job.env->id)
        best = w.get();
    }
    if (best) return give_locked(*best, job);
    if (live_locked() < static_cast<size_t>(std::max(options.max_workers, 1)))
      return spawn_locked(job, fx);
    Worker* oldest = nullptr;
    for (auto& w : workers) {
      if (w->phase == Worker::Phase::kIdle && (!oldest || w->idle_since < oldest->idle_since))
        oldest = w.get();
    }
    if (oldest) retire_locked(*oldest);
    job.phase = Job::Phase::kWaitingForWorker;
    waiting_for_worker.push_back(job.id);
  }

  void give_locked(Worker& w, Job& job) REQUIRES(mutex) {
    w.phase = w.phase == Worker::Phase::kStarting ? Worker::Phase::kStarting : Worker::Phase::kBusy;
    w.job = job.id;
    job.phase = Job::Phase::kAssigned;
    w.wake.signal_all();
  }

  void retire_locked(Worker& w) REQUIRES(mutex) {
    w.phase = Worker::Phase::kRetiring;
    w.wake.signal_all();
  }

  void spawn_locked(Job& job, Effects& fx) REQUIRES(mutex) {
    auto started = start_worker_locked(job.env, job.id);
    if (!started) {
      end_job_locked(job,
                     JobResult{JobStatus::kFailed,
                               false,
                               {},
                               "cannot start a compile worker: " + started.error().message},
                     fx);
      return;
    }
    job.phase = Job::Phase::kAssigned;
  }

  // A new worker of `env`, given job `job_id` (0: none; it idles once ready).
  // Its thread makes its process.
  Result<Worker*> start_worker_locked(const std::shared_ptr<const Environment>& env,
                                      uint64_t job_id) REQUIRES(mutex) {
    auto worker = std::make_unique<Worker>(next_worker++, env, &mutex);
    worker->job = job_id;
    Worker* raw = worker.get();
    workers.push_back(std::move(worker));
    ++stats.spawned;
    stats.peak_workers = std::max(stats.peak_workers, live_locked());
    raw->thread = std::thread([this, raw] { serve(*raw); });
    return raw;
  }

  // The pid a worker's hello names (-1: none).
  static pid_t greeted_pid(const std::string& hello) {
    auto doc = nlohmann::json::parse(hello, nullptr, false);
    if (!doc.is_object()) return -1;
    auto pid = doc.find("pid");
    if (pid == doc.end() || !pid->is_number_integer()) return -1;
    int64_t v = pid->get<int64_t>();
    return v > 0 && v <= INT32_MAX ? static_cast<pid_t>(v) : -1;
  }

  WorkerSpawn spawn_of(const Environment& env) const {
    WorkerSpawn spawn;
    spawn.python = env.python;
    spawn.argv.push_back(env.python);
    for (const std::string& a : options.worker_argv) spawn.argv.push_back(a);
    for (const std::string& a : env.args) spawn.argv.push_back(a);
    spawn.env = env.env;
    spawn.cwd = env.cwd;
    spawn.output_fd = options.output_fd;
    return spawn;
  }

  // A worker's process: forked by its environment's zygote (started first
  // when it has none, or when the one it had broke), or spawned when zygotes
  // are off, the zygote did not start (then the environment keeps no zygote),
  // or it could not fork. None once the pool stops. On a worker's thread,
  // without the lock.
  Result<std::unique_ptr<WorkerProcess>> make_process(
      const std::shared_ptr<const Environment>& env) {
    WorkerSpawn spawn = spawn_of(*env);
    auto spawn_unless_stopping = [&]() -> Result<std::unique_ptr<WorkerProcess>> {
      if (stopping_now()) return make_error(ErrorCode::kUnreachable, "stopping");
      return WorkerProcess::start(spawn);
    };
    if (!options.zygotes) return WorkerProcess::start(spawn);
    std::shared_ptr<ZygoteSlot> slot;
    {
      MutexLock lock(&mutex);
      if (stopping) return make_error(ErrorCode::kUnreachable, "stopping");
      auto& entry = zygotes[env->id];
      if (!entry) entry = std::make_shared<ZygoteSlot>();
      slot = entry;
    }
    std::shared_ptr<Zygote> zygote;
    {
      MutexLock lock(&slot->mutex);
      if (slot->zygote && slot->zygote->broken()) slot->zygote = nullptr;  // killed: a new one
      if (!slot->zygote && !slot->failed) {
        if (stopping_now()) return make_error(ErrorCode::kUnreachable, "stopping");
        WorkerSpawn z = spawn;
        z.argv.push_back("--zygote=1");
        auto spawned = Zygote::spawn(z);
        Result<void> greeted = spawned ? ok() : Result<void>(tl::unexpected(spawned.error()));
        if (spawned) {
          {
            MutexLock pool_lock(&mutex);
            slot->starting = *spawned;
            if (stopping) (*spawned)->kill();
            ++stats.zygotes_started;
          }
          greeted = (*spawned)->await_hello(Clock::now() + options.start_timeout);
          MutexLock pool_lock(&mutex);
          slot->starting = nullptr;
        }
        if (!greeted) {
          // Its workers are spawned from now on; this one too, unless the
          // zygote ran out of time (a worker would as well).
          slot->failed = true;
          if (greeted.error().code == ErrorCode::kTimeout)
            return make_error(greeted.error().code,
                              "its zygote did not start: " + greeted.error().message);
          return spawn_unless_stopping();
        }
        slot->zygote = std::move(*spawned);
      }
      zygote = slot->zygote;
    }
    if (zygote && !stopping_now()) {
      auto forked = zygote->fork_worker(Clock::now() + std::chrono::seconds(30));
      if (forked) {
        MutexLock lock(&mutex);
        ++stats.forked;
        return forked;
      }
    }
    return spawn_unless_stopping();
  }

  bool stopping_now() {
    MutexLock lock(&mutex);
    return stopping;
  }

  // Starts a worker of `env` ahead of its first job, as Inductor warms its own
  // pool when torch is imported: only while none of `env` is alive and the
  // bound has room (it holds no slot while it starts; it is one process).
  void warm(const std::shared_ptr<const Environment>& env) {
    MutexLock lock(&mutex);
    warm_locked(env, false);
  }

  // `make_room`: at the bound, retire the longest-idle worker of another
  // environment; a worker is then started for whoever awaits readiness when
  // it has exited (serve()).
  void warm_locked(const std::shared_ptr<const Environment>& env, bool make_room) REQUIRES(mutex) {
    if (stopping) return;
    for (const auto& w : workers) {
      if (w->phase != Worker::Phase::kDead && w->env->id == env->id) return;
    }
    if (live_locked() < static_cast<size_t>(std::max(options.max_workers, 1))) {
      if (auto started = start_worker_locked(env, 0); started) ++stats.warmed;
      return;
    }
    if (!make_room) return;
    Worker* oldest = nullptr;
    for (auto& w : workers) {
      if (w->phase == Worker::Phase::kIdle && (!oldest || w->idle_since < oldest->idle_since))
        oldest = w.get();
    }
    if (oldest) retire_locked(*oldest);
  }

  // A worker exited: the environments still waiting for readiness get one.
  void warm_awaited_locked() REQUIRES(mutex) {
    for (uint64_t id : std::vector<uint64_t>(awaiting_ready)) {
      auto it = jobs.find(id);
      if (it != jobs.end()) warm_locked(it->second->env, false);
    }
  }

  // The thread of one worker: hello, then jobs until it is retired, fails or
  // the pool stops. The worker's process is reaped here.
  void serve(Worker& w) {
    pthread_setname_np(pthread_self(), "ccpool-pyworker");
    std::optional<Error> failure;
    auto made = make_process(w.env);
    WorkerProcess* process = nullptr;
    {
      MutexLock lock(&mutex);
      if (made) {
        w.process = std::move(*made);
        process = w.process.get();
        if (w.killed || stopping) process->kill();
      }
    }
    if (!made) {
      failure = Error(made.error().code, "the compile worker did not start (" +
                                             made.error().message + "; see the service log)");
    } else if (auto hello = process->receive(Clock::now() + options.start_timeout); !hello) {
      failure = Error(hello.error().code, "the compile worker did not start (" +
                                              hello.error().message + "; see the service log)");
    } else if (hello->kind != WorkerFrameKind::kHello) {
      failure = Error(ErrorCode::kProtocol, "the compile worker did not greet");
    } else if (auto greeted = greeted_pid(hello->payload); greeted != process->pid()) {
      // A zygote that named one child and gave the channel to another.
      failure =
          Error(ErrorCode::kProtocol, "the compile worker pid " + std::to_string(process->pid()) +
                                          " greeted as pid " + std::to_string(greeted));
    }
    MutexLock lock(&mutex);
    if (!failure) {
      Effects fx;
      answer_ready_locked(w.env->id, fx);
      lock.unlock();
      run(fx);
      lock.lock();
    }
    if (!failure && w.phase == Worker::Phase::kStarting) {
      w.phase = w.job ? Worker::Phase::kBusy : Worker::Phase::kIdle;
      w.idle_since = Clock::now();
      if (!w.job) {  // warmed ahead of its jobs: take one that waits for a worker
        Effects fx;
        hand_over_locked(w, fx);
        lock.unlock();
        run(fx);
        lock.lock();
      }
    }
    while (!failure) {
      while (w.phase != Worker::Phase::kBusy && w.phase != Worker::Phase::kRetiring && !stopping)
        w.wake.wait();
      if (w.phase == Worker::Phase::kRetiring || stopping) break;
      failure = run_one_locked(w);
    }
    uint64_t job_id = w.job;
    // It takes no job from now on: a worker still kStarting with no job (one
    // that failed to greet) would otherwise be handed one while it is reaped
    // below, and that job would never end.
    if (w.phase != Worker::Phase::kBusy) w.phase = Worker::Phase::kRetiring;
    lock.unlock();
    if (!failure) {  // retired: ask it to exit, and wait for its channel to close
      [[maybe_unused]] auto sent =
          process->send(WorkerFrameKind::kExit, 0, {}, Clock::now() + std::chrono::seconds(5));
      [[maybe_unused]] auto eof = process->receive(Clock::now() + std::chrono::seconds(10));
    }
    // A worker that closed its channel is exiting: let it, so its status is
    // its own; one that broke the protocol or ran past a deadline is killed.
    bool exiting = !failure || failure->code == ErrorCode::kUnreachable;
    std::string ended;
    int64_t max_rss_kb = 0;
    if (process) {
      WorkerExit exit =
          process->reap(exiting ? std::chrono::milliseconds(2000) : std::chrono::milliseconds(0));
      ended = "; worker pid " + std::to_string(process->pid()) + " " + exit.describe();
      max_rss_kb = exit.max_rss_kb;
    }
    Effects fx;
    // Dropped without the lock, on this thread: the last worker of a zygote
    // ends it (~Zygote waits for it to exit).
    std::shared_ptr<ZygoteSlot> zygote;
    std::unique_ptr<WorkerProcess> gone;
    lock.lock();
    w.phase = Worker::Phase::kDead;
    gone = std::move(w.process);
    ++stats.exited;
    if (std::none_of(workers.begin(), workers.end(), [&](const auto& other) {
          return other->phase != Worker::Phase::kDead && other->env->id == w.env->id;
        })) {
      // A failed slot stays: the environment's workers are spawned.
      if (auto it = zygotes.find(w.env->id); it != zygotes.end() && !it->second->failed) {
        zygote = std::move(it->second);
        zygotes.erase(it);
      }
    }
    if (job_id) {
      std::string why = failure ? failure->message + ended : std::string("stopping");
      auto it = jobs.find(job_id);
      if (it != jobs.end())
        end_job_locked(*it->second, JobResult{JobStatus::kFailed, false, {}, why}, fx, max_rss_kb);
      w.job = 0;
    }
    warm_awaited_locked();
    while (!waiting_for_worker.empty() && !stopping &&
           live_locked() < static_cast<size_t>(std::max(options.max_workers, 1))) {
      uint64_t next = waiting_for_worker.front();
      waiting_for_worker.pop_front();
      auto it = jobs.find(next);
      if (it != jobs.end()) assign_locked(*it->second, fx);
    }
    lock.unlock();
    run(fx);
    gone.reset();
    zygote.reset();
    lock.lock();
    w.thread_done = true;  // tick() joins it now without waiting
  }

  // Sends w's job and waits for its result, with the lock released meanwhile.
  // An error ends the worker (serve() reaps it, then fails the job).
  std::optional<Error> run_one_locked(Worker& w) REQUIRES(mutex) {
    auto it = jobs.find(w.job);
    if (it == jobs.end()) {  // cancelled before it ran: the worker stays
      w.job = 0;
      w.phase = Worker::Phase::kIdle;
      w.idle_since = Clock::now();
      return std::nullopt;
    }
    uint64_t job_id = w.job;
    std::string payload = std::move(it->second->payload);
    std::optional<Clock::time_point> deadline;
    if (options.job_timeout.count() > 0) deadline = Clock::now() + options.job_timeout;
    mutex.unlock();
    Result<ResultPayload> result =
        w.process->send(WorkerFrameKind::kJob, job_id, payload, deadline)
            .and_then([&] { return w.process->receive(deadline); })
            .and_then([&](WorkerFrame frame) -> Result<ResultPayload> {
              if (frame.kind != WorkerFrameKind::kResult || frame.job_id != job_id) {
                return make_error(ErrorCode::kProtocol, "the compile worker answered out of turn");
              }
              return split_result(std::move(frame.payload));
            });
    if (result && options.result_arrived_for_test) options.result_arrived_for_test(job_id);
    Effects fx;
    mutex.lock();
    if (w.killed) {  // cancelled while its result was on the way: the process is dead
      return Error(ErrorCode::kUnreachable, "its job was cancelled and the worker killed");
    }
    if (!result) {
      if (result.error().code == ErrorCode::kTimeout) {
        return Error(ErrorCode::kTimeout, "the job ran past the job timeout (--job-timeout)");
      }
      return result.error();
    }
    int64_t rss = learn_locked(result->stats_json);
    w.job = 0;
    if (w.phase != Worker::Phase::kRetiring) w.phase = Worker::Phase::kIdle;
    w.idle_since = Clock::now();
    auto job = jobs.find(job_id);
    if (job != jobs.end()) {
      end_job_locked(*job->second,
                     JobResult{JobStatus::kDone, false, std::move(result->pickled), {}}, fx, rss);
    }
    hand_over_locked(w, fx);
    mutex.unlock();
    run(fx);
    mutex.lock();
    return std::nullopt;
  }

  bool greeted_worker_of_locked(const std::string& env_id) const REQUIRES(mutex) {
    for (const auto& w : workers) {
      if (w->env->id == env_id &&
          (w->phase == Worker::Phase::kIdle || w->phase == Worker::Phase::kBusy))
        return true;
    }
    return false;
  }

  // Answers the await_ready() jobs of `env_id` (a worker of it has greeted).
  void answer_ready_locked(const std::string& env_id, Effects& fx) REQUIRES(mutex) {
    std::vector<uint64_t> still;
    for (uint64_t id : awaiting_ready) {
      auto it = jobs.find(id);
      if (it == jobs.end()) continue;
      if (it->second->env->id != env_id) {
        still.push_back(id);
        continue;
      }
      fx.replies.emplace_back(std::move(it->second->done),
                              JobResult{JobStatus::kDone, false, {}, {}});
      jobs.erase(it);
    }
    awaiting_ready.swap(still);
  }

  // An idle worker takes a job that waits for one of its environment, or
  // retires so that a job of another environment gets a worker.
  void hand_over_locked(Worker& w, Effects& fx) REQUIRES(mutex) {
    if (w.phase != Worker::Phase::kIdle || waiting_for_worker.empty()) return;
    for (auto it = waiting_for_worker.begin(); it != waiting_for_worker.end(); ++it) {
      auto job = jobs.find(*it);
      if (job != jobs.end() && job->second->env->id == w.env->id) {
        waiting_for_worker.erase(it);
        return give_locked(w, *job->second);
      }
    }
    retire_locked(w);
  }

  // Sums the worker's reported counts; returns its peak RSS (kB) for the
  // scheduler's estimate.
  int64_t learn_locked(const std::string& stats_json) REQUIRES(mutex) {
    auto stats_doc = nlohmann::json::parse(stats_json, nullptr, false);
    if (!stats_doc.is_object()) return 0;
    int64_t rss = 0;
    if (auto r = stats_doc.find("rss_kb"); r != stats_doc.end() && r->is_number_integer()) {
      rss = std::clamp<int64_t>(r->get<int64_t>(), 0, int64_t{1} << 40);
    }
    if (auto c = stats_doc.find("counts");
        c != stats_doc.end() && c->is_object() && c->size() <= 32) {
      for (auto& [name, value] : c->items()) {
        if (name.size() <= 64 && value.is_number_unsigned())
          stats.counts[name] += value.get<uint64_t>();
      }
    }
    return rss;
  }

  // The job is over (result == nullopt: cancelled, nobody to tell). Frees its
  // slot, answers it, moves its flight on, forgets it.
  void end_job_locked(Job& job, std::optional<JobResult> result, Effects& fx, int64_t rss_kb = 0)
      REQUIRES(mutex) {
    if (job.admitted) fx.finished_with_rss.emplace_back(job.sched_id, rss_kb);
    job.admitted = false;
    bool succeeded = result && result->status == JobStatus::kDone;
    if (job.cancelled || !result) {
      ++stats.cancelled;
    } else {
      ++(succeeded ? stats.jobs_done : stats.jobs_failed);
      stats.followed += job.followed ? 1 : 0;
      result->followed = job.followed;
      fx.replies.emplace_back(std::move(job.done), std::move(*result));
    }
    if (job.leads) {
      flights.erase(job.flight_key);
      Job* next_leader = nullptr;
      for (uint64_t id : std::vector<uint64_t>(std::move(job.followers))) {
        auto f = jobs.find(id);
        if (f == jobs.end()) continue;
        Job& follower = *f->second;
        if (!succeeded && next_leader) {  // the others follow the new leader
          next_leader->followers.push_back(id);
          continue;
        }
        if (succeeded) {
          follower.followed = true;  // its compiles are cached now: all run at once
        } else {
          next_leader = &follower;  // the lead passes on
          follower.leads = true;
          flights[follower.flight_key] = id;
        }
        follower.phase = Job::Phase::kQueued;
        fx.to_schedule.push_back(id);
      }
    }
    jobs.erase(job.id);
  }

  // What a job is doing, for the log (WorkerPool::cancel).
  std::string describe_locked(const Job& job) const REQUIRES(mutex) {
    switch (job.phase) {
      case Job::Phase::kQueued:
        return "queued";
      case Job::Phase::kFollowing:
        for (const auto& [key, leader] : flights) {
          auto it = jobs.find(leader);
          if (it == jobs.end()) continue;
          const auto& f = it->second->followers;
          if (std::find(f.begin(), f.end(), job.id) != f.end())
            return "following job " + std::to_string(leader);
        }
        return "following";
      case Job::Phase::kWaitingForWorker:
        return "waiting for a worker";
      case Job::Phase::kAwaitingReady:
        return "awaiting readiness";
      case Job::Phase::kAssigned:
        break;
    }
    for (const auto& w : workers) {
      if (w->job != job.id || w->phase == Worker::Phase::kDead) continue;
      const char* doing = w->phase == Worker::Phase::kBusy       ? "running"
                          : w->phase == Worker::Phase::kStarting ? "starting"
                                                                 : "exiting";
      if (!w->process) return "waiting for its worker to start (killed)";
      return std::string(doing) + " in worker pid " + std::to_string(w->process->pid()) +
             " (killed)";
    }
    return "assigned to no live worker";
  }

  void fail_job(uint64_t job_id, const std::string& why) {
    Effects fx;
    {
      MutexLock lock(&mutex);
      auto it = jobs.find(job_id);
      if (it != jobs.end())
        end_job_locked(*it->second, JobResult{JobStatus::kFailed, false, {}, why}, fx);
    }
    run(fx);
  }
};

WorkerPool::WorkerPool(WorkerPoolOptions options, pool::Scheduler& scheduler)
    : m_state(std::make_shared<State>(std::move(options), scheduler)) {}

WorkerPool::~WorkerPool() {
  shutdown();
}

int WorkerPool::max_workers() const {
  return std::max(m_state->options.max_workers, 1);
}

uint64_t WorkerPool::submit(std::shared_ptr<const Environment> env, uint64_t bucket,
                            std::string flight_key, std::string payload, Done done) {
  State& s = *m_state;
  uint64_t id;
  bool schedule = true;
  {
    MutexLock lock(&s.mutex);
    id = s.next_job++;
    if (s.stopping) {
      lock.unlock();
      done(JobResult{JobStatus::kFailed, false, {}, "stopping"});
      return id;
    }
    auto job = std::make_unique<Job>();
    job->id = id;
    job->env = std::move(env);
    job->bucket = bucket;
    job->flight_key = std::move(flight_key);
    job->payload = std::move(payload);
    job->done = std::move(done);
    if (!job->flight_key.empty()) {
      auto leader = s.flights.find(job->flight_key);
      if (leader != s.flights.end()) {
        s.jobs.at(leader->second)->followers.push_back(id);
        job->phase = Job::Phase::kFollowing;
        schedule = false;
      } else {
        s.flights[job->flight_key] = id;
        job->leads = true;
      }
    }
    s.jobs.emplace(id, std::move(job));
  }
  if (schedule) s.schedule(id);
  return id;
}

uint64_t WorkerPool::await_ready(std::shared_ptr<const Environment> env, Done done) {
  State& s = *m_state;
  uint64_t id;
  {
    MutexLock lock(&s.mutex);
    id = s.next_job++;
    if (!s.stopping && !s.greeted_worker_of_locked(env->id)) {
      auto job = std::make_unique<Job>();
      job->id = id;
      job->env = env;
      job->done = std::move(done);
      job->phase = Job::Phase::kAwaitingReady;
      s.jobs.emplace(id, std::move(job));
      s.awaiting_ready.push_back(id);
      s.warm_locked(env, true);
      return id;
    }
  }
  bool stopping;
  {
    MutexLock lock(&s.mutex);
    stopping = s.stopping;
  }
  done(stopping ? JobResult{JobStatus::kFailed, false, {}, "stopping"}
                : JobResult{JobStatus::kDone, false, {}, {}});
  return id;
}

std::string WorkerPool::cancel(uint64_t job_id) {
  State& s = *m_state;
  Effects fx;
  pool::JobId queued = 0;
  std::string what;
  {
    MutexLock lock(&s.mutex);
    auto it = s.jobs.find(job_id);
    if (it == s.jobs.end()) return "ended";
    Job& job = *it->second;
    job.cancelled = true;
    job.done = nullptr;
    what = s.describe_locked(job);
    switch (job.phase) {
      case Job::Phase::kFollowing:
        for (auto& [key, leader] : s.flights) {
          auto& followers = s.jobs.at(leader)->followers;
          followers.erase(std::remove(followers.begin(), followers.end(), job_id), followers.end());
        }
        s.end_job_locked(job, std::nullopt, fx);
        break;
      case Job::Phase::kWaitingForWorker:
        s.waiting_for_worker.erase(
            std::remove(s.waiting_for_worker.begin(), s.waiting_for_worker.end(), job_id),
            s.waiting_for_worker.end());
        s.end_job_locked(job, std::nullopt, fx);
        break;
      case Job::Phase::kQueued:
        queued = job.sched_id;  // start() sees `cancelled` if it wins the race
        break;
      case Job::Phase::kAwaitingReady:
        s.awaiting_ready.erase(
            std::remove(s.awaiting_ready.begin(), s.awaiting_ready.end(), job_id),
            s.awaiting_ready.end());
        s.jobs.erase(it);
        break;
      case Job::Phase::kAssigned:
        for (auto& w : s.workers) {
          if (w->job == job_id && w->phase != Worker::Phase::kDead) {
            ++s.stats.killed;
            w->killed = true;
            // Its thread sees the channel close and ends the job (or, with no
            // process yet, kills the one it makes).
            if (w->process) w->process->kill();
          }
        }
        break;
    }
  }
  if (queued && s.scheduler.cancel_queued(queued)) {
    MutexLock lock(&s.mutex);
    auto it = s.jobs.find(job_id);
    if (it != s.jobs.end()) s.end_job_locked(*it->second, std::nullopt, fx);
  }
  s.run(fx);
  return what;
}

void WorkerPool::warm(std::shared_ptr<const Environment> env) {
  m_state->warm(env);
}

void WorkerPool::tick() {
  State& s = *m_state;
  std::vector<std::unique_ptr<Worker>> finished;
  {
    MutexLock lock(&s.mutex);
    auto now = Clock::now();
    for (auto it = s.workers.begin(); it != s.workers.end();) {
      Worker& w = **it;
      if (w.phase == Worker::Phase::kIdle && now - w.idle_since >= s.options.idle_timeout)
        s.retire_locked(w);
      if (w.phase == Worker::Phase::kDead && w.thread_done) {
        finished.push_back(std::move(*it));
        it = s.workers.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& w : finished) {
    if (w->thread.joinable()) w->thread.join();
  }
}

WorkerPoolStats WorkerPool::stats() const {
  State& s = *m_state;
  MutexLock lock(&s.mutex);
  WorkerPoolStats out = s.stats;
  for (const auto& w : s.workers) {
    if (w->phase == Worker::Phase::kDead) continue;
    ++out.workers;
    out.busy += w->phase == Worker::Phase::kBusy ? 1 : 0;
    out.starting += w->phase == Worker::Phase::kStarting ? 1 : 0;
    if (w->process) out.rss_kb += w->process->rss_kb();
  }
  out.waiting_for_worker = s.waiting_for_worker.size();
  for (const auto& [id, job] : s.jobs)
    out.following += job->phase == Job::Phase::kFollowing ? 1 : 0;
  return out;
}

void WorkerPool::shutdown() {
  State& s = *m_state;
  Effects fx;
  std::unordered_map<std::string, std::shared_ptr<ZygoteSlot>> zygotes;
  std::list<std::unique_ptr<Worker>> workers;
  {
    MutexLock lock(&s.mutex);
    if (s.stopping && s.workers.empty()) return;
    s.stopping = true;
    for (auto& [id, slot] : s.zygotes) {
      if (slot->starting) slot->starting->kill();
    }
    zygotes.swap(s.zygotes);
    for (auto& w : s.workers) {
      if (w->phase != Worker::Phase::kDead && w->process) w->process->kill();
      w->wake.signal_all();
    }
    workers.swap(s.workers);
  }
  for (auto& w : workers) {
    if (w->thread.joinable()) w->thread.join();
  }
  {
    MutexLock lock(&s.mutex);
    std::vector<uint64_t> left;
    for (auto& [id, job] : s.jobs) left.push_back(id);
    for (uint64_t id : left) {
      auto it = s.jobs.find(id);
      if (it != s.jobs.end())
        s.end_job_locked(*it->second, JobResult{JobStatus::kFailed, false, {}, "stopping"}, fx);
    }
    s.waiting_for_worker.clear();
    s.awaiting_ready.clear();
    fx.to_schedule.clear();
  }
  s.run(fx);
}

}  // namespace ccpool::workers
