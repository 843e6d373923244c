// WorkerPool with real worker processes (tests/workers/fake_worker.py speaks
// the worker channel protocol; /usr/bin/python3 runs it) and the real
// Scheduler: the bound on live workers, reuse, single flight, hand-over of a
// failed lead, cancellation killing a worker, environments kept apart, idle
// exit and hostile workers. Counts and orders, never seconds.
#include "workers/worker_pool.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "pool/scheduler.h"
#include "tests/support/scratch.h"

namespace ccpool::workers {
namespace {

using namespace std::chrono_literals;

const std::string kPython = "/usr/bin/python3";
const std::string kFakeWorker = std::string(CCPOOL_SOURCE_DIR) + "/tests/workers/fake_worker.py";

// Results as they arrive, by submission name.
class Results {
 public:
  WorkerPool::Done done(const std::string& name) {
    return [this, name](JobResult r) {
      std::lock_guard lock(m_mutex);
      m_results[name] = std::move(r);
      m_order.push_back(name);
      m_cv.notify_all();
    };
  }
  JobResult wait(const std::string& name, std::chrono::seconds bound = 60s) {
    std::unique_lock lock(m_mutex);
    bool got = m_cv.wait_for(lock, bound, [&] { return m_results.count(name) > 0; });
    EXPECT_TRUE(got) << "no result for " << name;
    return got ? m_results[name] : JobResult{JobStatus::kFailed, false, {}, "no result"};
  }
  bool has(const std::string& name) {
    std::lock_guard lock(m_mutex);
    return m_results.count(name) > 0;
  }

 private:
  std::mutex m_mutex;
  std::condition_variable m_cv;
  std::map<std::string, JobResult> m_results;
  std::vector<std::string> m_order;
};

std::string pid_of(const JobResult& r) {
  return r.payload.substr(r.payload.find('@') + 1);
}

// Waits until a gated job runs; returns its worker's pid (0: none came).
pid_t wait_for_running(const std::string& gate) {
  for (int i = 0; i < 3000; ++i) {
    for (auto& f : std::filesystem::directory_iterator(gate)) {
      std::string name = f.path().filename().string();
      if (name.rfind("running.", 0) == 0) return std::stoi(name.substr(8));
    }
    std::this_thread::sleep_for(10ms);
  }
  return 0;
}

pid_t parent_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream rest(text.substr(text.rfind(')') + 1));
  std::string state;
  pid_t ppid = 0;
  rest >> state >> ppid;
  return ppid;
}

bool pid_gone(pid_t pid) {
  for (int i = 0; i < 1000; ++i) {
    if (::kill(pid, 0) != 0) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

// The parameter: workers forked from a zygote per environment (the service's
// way), or each spawned.
class WorkerPoolTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (::access(kPython.c_str(), X_OK) != 0) GTEST_SKIP() << kPython << " is missing";
    m_dir = ccpool::testing::scratch_dir();
  }
  void start(int jobs, std::chrono::milliseconds idle = 60s,
             std::chrono::milliseconds job_timeout = 0ms) {
    pool::SchedulerOptions so;
    so.jobs = jobs;
    so.mem_budget = 64ull << 30;
    m_scheduler = std::make_unique<pool::Scheduler>(so);
    WorkerPoolOptions wo;
    wo.max_workers = jobs;
    wo.idle_timeout = idle;
    wo.job_timeout = job_timeout;
    wo.worker_argv = {kFakeWorker};
    wo.zygotes = GetParam();
    m_pool = std::make_unique<WorkerPool>(wo, *m_scheduler);
  }
  void TearDown() override {
    if (m_pool) m_pool->shutdown();
    m_pool.reset();
    m_scheduler.reset();
  }
  std::shared_ptr<const Environment> env(std::vector<std::string> vars = {}) {
    vars.push_back("FAKE_WORKER_RECORD=" + m_dir + "/workers.log");
    auto e = make_environment({kPython, m_dir, vars, {}}, "/nonexistent/python", {});
    EXPECT_TRUE(e.has_value()) << (e ? "" : e.error().message);
    return *e;
  }
  uint64_t submit(const std::string& name, const std::string& command, std::string key = "",
                  std::shared_ptr<const Environment> e = nullptr, uint64_t bucket = 0) {
    return m_pool->submit(e ? e : env(), bucket, std::move(key), command, m_results.done(name));
  }
  std::vector<std::string> lines(const std::string& file) {
    std::ifstream in(file);
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }

  std::string m_dir;
  std::unique_ptr<pool::Scheduler> m_scheduler;
  std::unique_ptr<WorkerPool> m_pool;
  Results m_results;
};

TEST_P(WorkerPoolTest, JobsRunInWarmWorkersThatAreReused) {
  start(2);
  auto e = env();
  for (int i = 0; i < 6; ++i) submit("j" + std::to_string(i), "echo:" + std::to_string(i), "", e);
  std::set<std::string> pids;
  for (int i = 0; i < 6; ++i) {
    JobResult r = m_results.wait("j" + std::to_string(i));
    ASSERT_EQ(r.status, JobStatus::kDone) << r.message;
    EXPECT_EQ(r.payload.substr(0, r.payload.find('@')), std::to_string(i));
    EXPECT_FALSE(r.followed);
    pids.insert(pid_of(r));
  }
  EXPECT_LE(pids.size(), 2u);  // six jobs, at most two processes ever
  WorkerPoolStats s = m_pool->stats();
  EXPECT_LE(s.spawned, 2u);
  EXPECT_LE(s.peak_workers, 2u);
  EXPECT_EQ(s.jobs_done, 6u);
  EXPECT_EQ(s.counts["jobs"], 6u);
}

TEST_P(WorkerPoolTest, NeverMoreLiveWorkersThanTheBound) {
  start(2);
  std::string gate = m_dir + "/gate";
  std::filesystem::create_directories(gate);
  auto a = env({"WORKER_ENV_MARK=a"}), b = env({"WORKER_ENV_MARK=b"}),
       c = env({"WORKER_ENV_MARK=c"});
  submit("a", "gate:" + gate + ":a", "", a);
  submit("b", "gate:" + gate + ":b", "", b);
  submit("c", "echo:c", "", c);  // a third environment: waits for a slot, then for a worker
  std::ofstream(gate + "/go").close();
  for (const char* name : {"a", "b", "c"}) EXPECT_EQ(m_results.wait(name).status, JobStatus::kDone);
  WorkerPoolStats s = m_pool->stats();
  EXPECT_EQ(s.spawned, 3u);
  EXPECT_EQ(s.peak_workers, 2u);  // c's worker started only after a or b's had exited
  EXPECT_GE(s.exited, 1u);
}

TEST_P(WorkerPoolTest, EqualFlightKeysRunOneAfterAnother) {
  start(2);
  std::string log = m_dir + "/runs.log";
  auto e = env();
  submit("leader", "log:" + log + ":leader", "kernel-1", e);
  submit("f1", "log:" + log + ":f1", "kernel-1", e);
  submit("f2", "log:" + log + ":f2", "kernel-1", e);
  JobResult leader = m_results.wait("leader"), f1 = m_results.wait("f1"), f2 = m_results.wait("f2");
  EXPECT_FALSE(leader.followed);
  EXPECT_TRUE(f1.followed);
  EXPECT_TRUE(f2.followed);
  std::vector<std::string> runs = lines(log);
  ASSERT_EQ(runs.size(), 6u);
  // The leader ended before either follower started.
  EXPECT_NE(runs[0].find("start leader"), std::string::npos) << runs[0];
  EXPECT_NE(runs[1].find("end leader"), std::string::npos) << runs[1];
  EXPECT_EQ(m_pool->stats().followed, 2u);
}

TEST_P(WorkerPoolTest, ALeaderThatFailsHandsTheLeadToItsFirstFollower) {
  start(2);
  std::string log = m_dir + "/runs.log";
  auto e = env();
  submit("leader", "exit:7", "k", e);  // the worker dies mid-job
  submit("f1", "log:" + log + ":f1", "k", e);
  submit("f2", "log:" + log + ":f2", "k", e);
  JobResult leader = m_results.wait("leader");
  EXPECT_EQ(leader.status, JobStatus::kFailed);
  EXPECT_NE(leader.message.find("exited 7"), std::string::npos) << leader.message;
  JobResult f1 = m_results.wait("f1"), f2 = m_results.wait("f2");
  EXPECT_EQ(f1.status, JobStatus::kDone);
  EXPECT_FALSE(f1.followed);  // it led, after the failed leader
  EXPECT_TRUE(f2.followed);
  std::vector<std::string> runs = lines(log);
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_NE(runs[1].find("end f1"), std::string::npos) << runs[1];
}

TEST_P(WorkerPoolTest, CancellingARunningJobKillsItsWorkerAndNeverAnswers) {
  start(2);
  std::string gate = m_dir + "/gate";
  std::filesystem::create_directories(gate);
  auto e = env();
  uint64_t id = submit("victim", "gate:" + gate + ":victim", "k", e);
  submit("follower", "echo:follower", "k", e);
  pid_t worker = wait_for_running(gate);
  ASSERT_NE(worker, 0);
  EXPECT_EQ(m_pool->cancel(id), "running in worker pid " + std::to_string(worker) + " (killed)");
  EXPECT_TRUE(pid_gone(worker)) << "the cancelled job's worker " << worker << " still runs";
  JobResult f = m_results.wait("follower");  // the lead passed on
  EXPECT_EQ(f.status, JobStatus::kDone);
  EXPECT_FALSE(m_results.has("victim"));
  WorkerPoolStats s = m_pool->stats();
  EXPECT_EQ(s.cancelled, 1u);
  EXPECT_EQ(s.killed, 1u);
  EXPECT_EQ(s.busy, 0u);
}

// A cancel between a job's result arriving and the pool taking it kills the
// worker after it answered: that worker must be reaped, never handed the next
// job (which then failed "killed by signal 9").
TEST_P(WorkerPoolTest, AWorkerKilledAsItsResultArrivesTakesNoOtherJob) {
  pool::SchedulerOptions so;
  so.jobs = 1;
  so.mem_budget = 64ull << 30;
  m_scheduler = std::make_unique<pool::Scheduler>(so);
  std::atomic<bool> armed{true};
  std::mutex cancelled_mutex;
  std::string cancelled;
  WorkerPoolOptions wo;
  wo.max_workers = 1;
  wo.worker_argv = {kFakeWorker};
  wo.zygotes = GetParam();
  wo.result_arrived_for_test = [&](uint64_t job_id) {
    if (!armed.exchange(false)) return;
    std::string what = m_pool->cancel(job_id);
    std::lock_guard lock(cancelled_mutex);
    cancelled = what;
  };
  m_pool = std::make_unique<WorkerPool>(wo, *m_scheduler);
  auto e = env();
  submit("victim", "echo:victim", "", e);
  for (int i = 0; i < 3000 && m_pool->stats().cancelled == 0; ++i)
    std::this_thread::sleep_for(10ms);
  ASSERT_EQ(m_pool->stats().cancelled, 1u);
  {
    std::lock_guard lock(cancelled_mutex);
    EXPECT_NE(cancelled.find("(killed)"), std::string::npos) << cancelled;
  }
  submit("next", "echo:next", "", e);
  JobResult next = m_results.wait("next");
  EXPECT_EQ(next.status, JobStatus::kDone) << next.message;
  EXPECT_EQ(next.payload.substr(0, 5), "next@") << next.payload;
  EXPECT_FALSE(m_results.has("victim"));
  WorkerPoolStats s = m_pool->stats();
  EXPECT_EQ(s.killed, 1u);
  EXPECT_EQ(s.jobs_failed, 0u);
  EXPECT_EQ(s.spawned, 2u);  // the killed worker was replaced, not reused
}

TEST_P(WorkerPoolTest, CancellingAQueuedOrFollowingJobLeavesTheOthersAlone) {
  start(1);
  std::string gate = m_dir + "/gate";
  std::filesystem::create_directories(gate);
  auto e = env();
  uint64_t running = submit("running", "gate:" + gate + ":running", "k", e);
  uint64_t follower = submit("follower", "echo:follower", "k", e);
  uint64_t queued = submit("queued", "echo:queued", "", e);
  submit("last", "echo:last", "", e);
  EXPECT_EQ(m_pool->cancel(follower), "following job " + std::to_string(running));
  EXPECT_EQ(m_pool->cancel(queued), "queued");  // the only slot is the running job's
  std::ofstream(gate + "/go").close();
  EXPECT_EQ(m_results.wait("running").status, JobStatus::kDone);
  EXPECT_EQ(m_results.wait("last").status, JobStatus::kDone);
  EXPECT_FALSE(m_results.has("follower"));
  EXPECT_FALSE(m_results.has("queued"));
  EXPECT_EQ(m_pool->stats().cancelled, 2u);
  EXPECT_EQ(m_pool->stats().killed, 0u);
}

TEST_P(WorkerPoolTest, WarmStartsOneWorkerAheadAndTheFirstJobUsesIt) {
  start(2);
  auto e = env();
  m_pool->warm(e);
  m_pool->warm(e);  // one per environment
  EXPECT_EQ(m_pool->stats().spawned, 1u);
  JobResult first = (submit("first", "echo:first", "", e), m_results.wait("first"));
  EXPECT_EQ(first.status, JobStatus::kDone);
  WorkerPoolStats s = m_pool->stats();
  EXPECT_EQ(s.spawned, 1u);  // the job went to the warmed worker
  EXPECT_EQ(s.warmed, 1u);
  // At the bound nothing more is warmed.
  auto other = env({"WORKER_ENV_MARK=other"}), third = env({"WORKER_ENV_MARK=third"});
  m_pool->warm(other);
  m_pool->warm(third);
  EXPECT_EQ(m_pool->stats().spawned, 2u);
  EXPECT_LE(m_pool->stats().peak_workers, 2u);
}

TEST_P(WorkerPoolTest, TheReadinessProbeNeverWaitsForASlot) {
  start(1);
  std::string gate = m_dir + "/gate";
  std::filesystem::create_directories(gate);
  auto e = env();
  m_pool->await_ready(e, m_results.done("cold"));  // warms a worker, answered once it greets
  EXPECT_EQ(m_results.wait("cold").status, JobStatus::kDone);
  submit("busy", "gate:" + gate + ":busy", "", e);  // holds the only slot
  ASSERT_NE(wait_for_running(gate), 0);
  m_pool->await_ready(e, m_results.done("probe"));
  EXPECT_TRUE(m_results.has("probe"));  // at once: a worker of e is up, the slot does not matter
  EXPECT_EQ(m_pool->stats().jobs_done, 0u);
  std::ofstream(gate + "/go").close();
  EXPECT_EQ(m_results.wait("busy").status, JobStatus::kDone);
  EXPECT_EQ(m_pool->stats().spawned, 1u);
}

TEST_P(WorkerPoolTest, ReadinessAtTheBoundRetiresAnIdleWorkerOfAnotherEnvironment) {
  start(1);
  auto old_env = env({"WORKER_ENV_MARK=old"}), new_env = env({"WORKER_ENV_MARK=new"});
  EXPECT_EQ((submit("old", "echo:old", "", old_env), m_results.wait("old")).status,
            JobStatus::kDone);
  m_pool->await_ready(new_env, m_results.done("ready"));  // the only live worker is old_env's, idle
  EXPECT_EQ(m_results.wait("ready").status, JobStatus::kDone);
  WorkerPoolStats s = m_pool->stats();
  EXPECT_EQ(s.spawned, 2u);
  EXPECT_EQ(s.peak_workers, 1u);
  EXPECT_EQ(s.exited, 1u);
}

TEST_P(WorkerPoolTest, EnvironmentsNeverShareAWorker) {
  start(2);
  auto a = env({"TORCHINDUCTOR_FX=1"}), b = env({"TORCHINDUCTOR_FX=2"});
  EXPECT_NE(a->id, b->id);
  submit("a1", "echo:a1", "", a);
  JobResult a1 = m_results.wait("a1");
  submit("b1", "echo:b1", "", b);
  JobResult b1 = m_results.wait("b1");
  submit("a2", "echo:a2", "", a);
  JobResult a2 = m_results.wait("a2");
  EXPECT_NE(pid_of(a1), pid_of(b1));
  EXPECT_EQ(pid_of(a1), pid_of(a2));  // the warm worker of its environment
}

TEST_P(WorkerPoolTest, IdleWorkersExitAfterTheIdleTimeout) {
  start(1, 200ms);
  JobResult r = (submit("j", "echo:j"), m_results.wait("j"));
  pid_t pid = std::stoi(pid_of(r));
  for (int i = 0; i < 300 && m_pool->stats().workers > 0; ++i) {
    m_pool->tick();
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(m_pool->stats().workers, 0u);
  EXPECT_TRUE(pid_gone(pid));
}

TEST_P(WorkerPoolTest, AWorkerThatNeverGreetsOrLiesFailsItsJobOnly) {
  start(2, 60s, 20s);
  auto silent = env({"FAKE_WORKER_HELLO=0"});
  submit("silent", "echo:x", "", silent);
  JobResult r = m_results.wait("silent");
  EXPECT_EQ(r.status, JobStatus::kFailed);
  EXPECT_NE(r.message.find("did not start"), std::string::npos) << r.message;
  submit("garbage", "garbage");
  JobResult g = m_results.wait("garbage");
  EXPECT_EQ(g.status, JobStatus::kFailed);
  EXPECT_NE(g.message.find("over the bound"), std::string::npos) << g.message;
  submit("fine", "echo:fine");  // the pool goes on
  EXPECT_EQ(m_results.wait("fine").status, JobStatus::kDone);
}

// A worker must greet as the pid the service knows it by (a zygote could
// hand one child's channel to another).
TEST_P(WorkerPoolTest, AWorkerThatGreetsAsAnotherPidFailsItsJob) {
  start(1);
  auto e = env({"FAKE_WORKER_HELLO_PID=" + std::to_string(::getpid())});
  JobResult r = (submit("j", "echo:j", "", e), m_results.wait("j"));
  EXPECT_EQ(r.status, JobStatus::kFailed);
  EXPECT_NE(r.message.find("greeted as pid " + std::to_string(::getpid())), std::string::npos)
      << r.message;
}

// A warmed worker that closed its channel without a hello is still exiting
// (reaped with a grace) when a job of its environment arrives: the job must
// not be handed to it (it was, and was never answered nor could be cancelled).
TEST_P(WorkerPoolTest, AJobNeverGoesToAWorkerThatFailedToStart) {
  start(2);
  std::string closed = m_dir + "/closed";
  auto e = env({"FAKE_WORKER_HELLO=close:" + closed});
  m_pool->warm(e);
  for (int i = 0; i < 1000 && !std::filesystem::exists(closed); ++i)
    std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(std::filesystem::exists(closed));
  std::this_thread::sleep_for(200ms);  // the pool has seen the channel close; the worker lingers
  submit("j", "echo:j", "", e);
  JobResult r = m_results.wait("j", 20s);
  EXPECT_EQ(r.status, JobStatus::kFailed);
  EXPECT_NE(r.message.find("did not start"), std::string::npos) << r.message;
}

TEST_P(WorkerPoolTest, AJobPastTheTimeoutFailsAndItsWorkerIsKilled) {
  start(1, 60s, 300ms);
  submit("slow", "sleep:30:slow");
  JobResult r = m_results.wait("slow");
  EXPECT_EQ(r.status, JobStatus::kFailed);
  EXPECT_NE(r.message.find("job timeout"), std::string::npos) << r.message;
}

TEST_P(WorkerPoolTest, ShutdownAnswersEveryJobStopping) {
  start(1);
  std::string gate = m_dir + "/gate";
  std::filesystem::create_directories(gate);
  submit("running", "gate:" + gate + ":x");
  submit("queued", "echo:q");
  ASSERT_NE(wait_for_running(gate), 0);
  m_pool->shutdown();
  EXPECT_EQ(m_results.wait("running").status, JobStatus::kFailed);
  EXPECT_EQ(m_results.wait("queued").status, JobStatus::kFailed);
  EXPECT_EQ(m_pool->stats().workers, 0u);
  submit("late", "echo:late");
  EXPECT_EQ(m_results.wait("late").message, "stopping");
}

using ZygoteTest = WorkerPoolTest;

// With zygotes, every worker of an environment is a fork of its one zygote.
TEST_P(ZygoteTest, WorkersOfAnEnvironmentAreForksOfItsZygote) {
  start(3);
  std::string gate = m_dir + "/gate";
  std::filesystem::create_directories(gate);
  auto e = env(), other = env({"WORKER_ENV_MARK=other"});
  for (const char* name : {"a", "b"}) submit(name, std::string("gate:") + gate + ":" + name, "", e);
  submit("c", "gate:" + gate + ":c", "", other);
  for (int i = 0; i < 1000 && std::distance(std::filesystem::directory_iterator(gate),
                                            std::filesystem::directory_iterator()) < 3;
       ++i)
    std::this_thread::sleep_for(10ms);
  std::map<std::string, pid_t> parents;
  for (const auto& entry : std::filesystem::directory_iterator(gate)) {
    pid_t pid = std::stoi(entry.path().extension().string().substr(1));
    parents[entry.path().string()] = parent_of(pid);
  }
  ASSERT_EQ(parents.size(), 3u);
  std::set<pid_t> zygotes;
  for (const auto& [path, parent] : parents) zygotes.insert(parent);
  EXPECT_EQ(zygotes.size(), 2u);             // a and b share e's zygote; c has other's
  EXPECT_EQ(zygotes.count(::getpid()), 0u);  // none is the service's own child
  std::ofstream(gate + "/go").close();
  for (const char* name : {"a", "b", "c"}) EXPECT_EQ(m_results.wait(name).status, JobStatus::kDone);
  WorkerPoolStats s = m_pool->stats();
  EXPECT_EQ(s.zygotes_started, 2u);
  EXPECT_EQ(s.forked, 3u);
}

// When its zygote exits before it greets, an environment's workers are
// spawned, each an interpreter of its own, the first one too.
TEST_P(ZygoteTest, WithoutItsZygoteAnEnvironmentsWorkersAreSpawned) {
  start(2, 100ms);
  auto e = env({"FAKE_ZYGOTE_HELLO=0"});
  JobResult first = (submit("first", "echo:first", "", e), m_results.wait("first"));
  EXPECT_EQ(first.status, JobStatus::kDone) << first.message;
  EXPECT_EQ(parent_of(std::stoi(pid_of(first))), ::getpid());
  for (int i = 0; i < 300 && m_pool->stats().workers > 0; ++i) {  // its worker exits
    m_pool->tick();
    std::this_thread::sleep_for(10ms);
  }
  JobResult second = (submit("second", "echo:second", "", e), m_results.wait("second"));
  EXPECT_EQ(second.status, JobStatus::kDone) << second.message;
  EXPECT_EQ(parent_of(std::stoi(pid_of(second))), ::getpid());
  EXPECT_EQ(m_pool->stats().forked, 0u);
  EXPECT_EQ(m_pool->stats().zygotes_started, 1u);  // not tried again
}

// A zygote killed under its workers takes them with it: their jobs fail, and
// the pool goes on with a new zygote.
TEST_P(ZygoteTest, AKilledZygoteTakesItsWorkersAndThePoolGoesOn) {
  start(2);
  std::string gate = m_dir + "/gate";
  std::filesystem::create_directories(gate);
  auto e = env();
  submit("victim", "gate:" + gate + ":victim", "", e);
  pid_t worker = wait_for_running(gate);
  ASSERT_NE(worker, 0);
  pid_t zygote = parent_of(worker);
  ASSERT_NE(zygote, ::getpid());
  ASSERT_EQ(::kill(zygote, SIGKILL), 0);
  JobResult victim = m_results.wait("victim");
  EXPECT_EQ(victim.status, JobStatus::kFailed);
  EXPECT_TRUE(pid_gone(worker)) << "worker " << worker << " outlived its zygote";
  for (int i = 0; i < 300 && m_pool->stats().workers > 0; ++i) {
    m_pool->tick();
    std::this_thread::sleep_for(10ms);
  }
  JobResult next = (submit("next", "echo:next", "", e), m_results.wait("next"));
  EXPECT_EQ(next.status, JobStatus::kDone) << next.message;
  EXPECT_NE(parent_of(std::stoi(pid_of(next))), zygote);
}

// A zygote's answer is checked: a pid that is not its child (here, the test
// process itself) is never adopted, so never signalled; the worker is spawned.
TEST_P(ZygoteTest, APidThatIsNotTheZygotesChildIsNeverAdopted) {
  start(2);
  auto e = env({"FAKE_ZYGOTE_PID=" + std::to_string(::getpid())});
  JobResult r = (submit("j", "echo:j", "", e), m_results.wait("j"));
  EXPECT_EQ(r.status, JobStatus::kDone) << r.message;
  EXPECT_EQ(parent_of(std::stoi(pid_of(r))), ::getpid());  // spawned, not forked
  EXPECT_EQ(m_pool->stats().forked, 0u);
  EXPECT_EQ(m_pool->stats().zygotes_started, 1u);
}

// A zygote that broke (here: it named a pid that is not its child) is killed,
// and the environment's next worker gets a new zygote, while the first one's
// spawned worker is still busy.
TEST_P(ZygoteTest, ABrokenZygoteIsReplaced) {
  start(2);
  std::string gate = m_dir + "/gate";
  std::filesystem::create_directories(gate);
  auto e = env({"FAKE_ZYGOTE_PID=" + std::to_string(::getpid())});
  submit("a", "gate:" + gate + ":a", "", e);
  ASSERT_NE(wait_for_running(gate), 0);
  JobResult b = (submit("b", "echo:b", "", e), m_results.wait("b"));  // a second worker
  EXPECT_EQ(b.status, JobStatus::kDone) << b.message;
  EXPECT_EQ(parent_of(std::stoi(pid_of(b))), ::getpid());
  std::ofstream(gate + "/go").close();
  EXPECT_EQ(m_results.wait("a").status, JobStatus::kDone);
  WorkerPoolStats s = m_pool->stats();
  EXPECT_EQ(s.zygotes_started, 2u);  // the broken one was not asked again
  EXPECT_EQ(s.forked, 0u);
}

INSTANTIATE_TEST_SUITE_P(Spawned, WorkerPoolTest, ::testing::Values(false));
INSTANTIATE_TEST_SUITE_P(Zygotes, WorkerPoolTest, ::testing::Values(true));
INSTANTIATE_TEST_SUITE_P(Zygotes, ZygoteTest, ::testing::Values(true));

}  // namespace
}  // namespace ccpool::workers
