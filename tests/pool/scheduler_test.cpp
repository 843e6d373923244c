#include "pool/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <fstream>
#include <future>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "base/process_facts.h"
#include "pool/process_runner.h"
#include "tests/pool/pool_test_support.h"

namespace ccpool::pool {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;

// Records the order in which `start` callbacks run; jobs are finished by hand.
class StartLog {
 public:
  std::function<void(JobId)> recorder() {
    return [this](JobId id) {
      std::lock_guard lock(m_mutex);
      m_started.push_back(id);
      m_cv.notify_all();
    };
  }
  // Waits until `count` starts have been recorded; returns a copy of the log.
  std::vector<JobId> wait_for(size_t count) {
    std::unique_lock lock(m_mutex);
    m_cv.wait(lock, [&] { return m_started.size() >= count; });
    return m_started;
  }
  size_t size() {
    std::lock_guard lock(m_mutex);
    return m_started.size();
  }

 private:
  std::mutex m_mutex;
  std::condition_variable m_cv;
  std::vector<JobId> m_started;
};

SchedulerOptions options(int jobs, uint64_t budget, uint64_t default_estimate = 64 * kMiB) {
  SchedulerOptions o;
  o.jobs = jobs;
  o.mem_budget = budget;
  o.default_estimate = default_estimate;
  return o;
}

TEST(SchedulerTest, SixtyFourRealJobsNeverExceedTwo) {
  Scheduler scheduler(options(2, 64 * kGiB));
  ProcessRunner runner;
  std::string counter = ccpool::testing::scratch_dir() + "/concurrency";
  std::mutex mutex;
  std::condition_variable cv;
  int done = 0, failed = 0;
  for (int i = 0; i < 64; ++i) {
    scheduler.submit(static_cast<uint64_t>(i % 4), "tool", [&](JobId id) {
      auto pid = runner.spawn(testing::tool_spec({"concurrency", counter, "5"}), id,
                              [&, id](ProcessResult r) {
                                scheduler.finish(id, r.max_rss_kb);
                                std::lock_guard lock(mutex);
                                failed += r.exit_code != 0;
                                ++done;
                                cv.notify_all();
                              });
      if (!pid) {
        scheduler.finish(id, 0);
        std::lock_guard lock(mutex);
        ++failed;
        ++done;
        cv.notify_all();
      }
    });
  }
  {
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return done == 64; });
  }
  EXPECT_EQ(failed, 0);
  SchedulerStats stats = scheduler.stats();
  EXPECT_LE(stats.peak_running, 2u);
  EXPECT_GE(stats.peak_running, 1u);
  EXPECT_EQ(stats.running, 0u);
  EXPECT_EQ(stats.queued, 0u);
  EXPECT_EQ(stats.reserved_bytes, 0u);
  long current = -1, max = -1;
  std::ifstream(counter) >> current >> max;
  EXPECT_EQ(current, 0);
  EXPECT_GE(max, 1);
  EXPECT_LE(max, 2);
  // The tool's own view can only be at most the scheduler's.
  EXPECT_LE(static_cast<size_t>(max), stats.peak_running);
}

TEST(SchedulerTest, AnotherClientsFirstJobDoesNotWaitForAQueueOfFifty) {
  const int jobs = 2;
  Scheduler scheduler(options(jobs, 64 * kGiB));
  StartLog log;
  std::vector<JobId> a_jobs;
  for (int i = 0; i < 50; ++i) a_jobs.push_back(scheduler.submit(1, "a", log.recorder()));
  log.wait_for(jobs);
  JobId b = scheduler.submit(2, "b", log.recorder());

  // Finish the oldest running job one at a time until B has started.
  size_t finished = 0;
  std::vector<JobId> started = log.wait_for(jobs);
  while (std::find(started.begin(), started.end(), b) == started.end() && finished < 51) {
    scheduler.finish(started[finished++], 0);
    started = log.wait_for(std::min<size_t>(finished + jobs, 51));
  }
  auto position = std::find(started.begin(), started.end(), b) - started.begin();
  // B is among the first jobs+1 starts after its submission.
  EXPECT_LT(position, jobs + (jobs + 1));
  EXPECT_LE(finished, static_cast<size_t>(jobs + 1));
  // FIFO within client A. The first `jobs` were admitted together and their
  // start callbacks run on different arena threads, so only their set is fixed.
  std::vector<JobId> a_order;
  for (JobId id : started) {
    if (id != b) a_order.push_back(id);
  }
  std::sort(a_order.begin(), a_order.begin() + jobs);
  EXPECT_TRUE(std::equal(a_order.begin(), a_order.end(), a_jobs.begin()));
  scheduler.drain_queued(nullptr);
}

TEST(SchedulerTest, RoundRobinAlternatesBetweenBusyClients) {
  Scheduler scheduler(options(1, 64 * kGiB));
  StartLog log;
  JobId first = scheduler.submit(1, "x", log.recorder());
  log.wait_for(1);
  std::vector<JobId> a, b;
  for (int i = 0; i < 3; ++i) a.push_back(scheduler.submit(1, "x", log.recorder()));
  for (int i = 0; i < 3; ++i) b.push_back(scheduler.submit(2, "x", log.recorder()));
  scheduler.finish(first, 0);
  std::vector<JobId> order;
  for (size_t n = 2; n <= 7; ++n) {
    order = log.wait_for(n);
    scheduler.finish(order.back(), 0);
  }
  // Client 1's queue emptied when `first` started, so it re-entered the ring
  // with a[0], ahead of client 2; from then on the clients alternate.
  std::vector<JobId> expected = {first, a[0], b[0], a[1], b[1], a[2], b[2]};
  EXPECT_EQ(order, expected);
}

TEST(SchedulerTest, LearnedEstimatesLimitConcurrencyWithoutStarvation) {
  Scheduler scheduler(options(4, 1 * kGiB, 100 * kMiB));
  StartLog log;
  // Learn "big" = 600 MiB from one measured peak.
  JobId learn = scheduler.submit(1, "big", log.recorder());
  log.wait_for(1);
  scheduler.finish(learn, 600 * 1024);
  EXPECT_EQ(scheduler.estimate("big"), 600 * kMiB);

  std::vector<JobId> big;
  for (int i = 0; i < 5; ++i)
    big.push_back(scheduler.submit(static_cast<uint64_t>(i), "big", log.recorder()));
  for (int i = 0; i < 5; ++i) {
    log.wait_for(2 + static_cast<size_t>(i));
    SchedulerStats stats = scheduler.stats();
    EXPECT_EQ(stats.running, 1u) << "after " << i << " finishes";
    EXPECT_EQ(stats.queued, static_cast<size_t>(4 - i));
    EXPECT_EQ(stats.reserved_bytes, 600 * kMiB);
    scheduler.finish(big[static_cast<size_t>(i)], 600 * 1024);
  }
  EXPECT_EQ(log.size(), 6u);
  EXPECT_EQ(scheduler.stats().peak_running, 1u);

  // An estimate above the whole budget still runs, one at a time.
  JobId huge_learn = scheduler.submit(1, "huge", log.recorder());
  log.wait_for(7);
  scheduler.finish(huge_learn, 3 * 1024 * 1024);  // 3 GiB
  JobId h1 = scheduler.submit(1, "huge", log.recorder());
  JobId h2 = scheduler.submit(2, "huge", log.recorder());
  log.wait_for(8);
  EXPECT_EQ(scheduler.stats().running, 1u);
  EXPECT_EQ(scheduler.stats().queued, 1u);
  scheduler.finish(h1, 0);
  EXPECT_EQ(log.wait_for(9).back(), h2);
  scheduler.finish(h2, 0);

  // Small jobs fill every slot: 4 * 100 MiB fits in 1 GiB.
  for (int i = 0; i < 6; ++i) scheduler.submit(static_cast<uint64_t>(i), "small", log.recorder());
  log.wait_for(13);
  EXPECT_EQ(scheduler.stats().running, 4u);
  EXPECT_EQ(scheduler.stats().queued, 2u);
  EXPECT_EQ(scheduler.stats().reserved_bytes, 400 * kMiB);
  scheduler.drain_queued(nullptr);
}

// docs/pool.md: when the next client's head job does not fit the memory budget, admission waits
// for memory; a smaller job of another client queued behind it must not jump ahead.
TEST(SchedulerTest, ASmallJobDoesNotOvertakeABigHeadThatDoesNotFit) {
  Scheduler scheduler(options(4, 1 * kGiB, 100 * kMiB));
  StartLog log;
  JobId learn = scheduler.submit(9, "big", log.recorder());
  log.wait_for(1);
  scheduler.finish(learn, 600 * 1024);
  ASSERT_EQ(scheduler.estimate("big"), 600 * kMiB);

  JobId big1 = scheduler.submit(1, "big", log.recorder());  // runs: 600 MiB reserved
  JobId big2 = scheduler.submit(2, "big", log.recorder());  // 1200 MiB > 1 GiB: waits
  JobId small =
      scheduler.submit(3, "small", log.recorder());  // 700 MiB would fit, but is behind big2
  SchedulerStats stats = scheduler.stats();
  EXPECT_EQ(stats.running, 1u);
  EXPECT_EQ(stats.queued, 2u);
  EXPECT_EQ(stats.reserved_bytes, 600 * kMiB);
  EXPECT_FALSE(scheduler.cancel_queued(big1));  // big1 is the one running
  EXPECT_EQ(log.wait_for(2)[1], big1);

  scheduler.finish(big1, 600 * 1024);  // frees 600 MiB: big2, then small (700 MiB) fit together
  stats = scheduler.stats();
  EXPECT_EQ(stats.running, 2u);
  EXPECT_EQ(stats.queued, 0u);
  EXPECT_EQ(stats.reserved_bytes, 700 * kMiB);
  std::vector<JobId> started = log.wait_for(4);
  // big2 and small were admitted together; their start callbacks may run in either order.
  std::sort(started.begin() + 2, started.end());
  EXPECT_EQ(started, (std::vector<JobId>{learn, big1, big2, small}));
  scheduler.finish(big2, 0);
  scheduler.finish(small, 0);
  EXPECT_EQ(scheduler.stats().reserved_bytes, 0u);
}

TEST(SchedulerTest, EstimateIsTheMaxOfTheLastEightPeaks) {
  Scheduler scheduler(options(1, 64 * kGiB, 77 * kMiB));
  EXPECT_EQ(scheduler.estimate("cc"), 77 * kMiB);
  StartLog log;
  size_t runs = 0;
  auto run = [&](int64_t rss_kb) {
    JobId id = scheduler.submit(1, "cc", log.recorder());
    log.wait_for(++runs);
    scheduler.finish(id, rss_kb);
  };
  run(0);  // no sample: still the default
  EXPECT_EQ(scheduler.estimate("cc"), 77 * kMiB);
  run(900 * 1024);
  for (int i = 0; i < 7; ++i) run(100 * 1024);
  EXPECT_EQ(scheduler.estimate("cc"), 900 * kMiB);  // still within the window
  run(200 * 1024);                                  // pushes the 900 MiB peak out
  EXPECT_EQ(scheduler.estimate("cc"), 200 * kMiB);
  EXPECT_EQ(scheduler.estimate("other"), 77 * kMiB);
}

TEST(SchedulerTest, CancelQueuedRemovesOnlyJobsThatHaveNotStarted) {
  Scheduler scheduler(options(1, 64 * kGiB));
  StartLog log;
  JobId first = scheduler.submit(1, "x", log.recorder());
  JobId second = scheduler.submit(1, "x", log.recorder());
  JobId third = scheduler.submit(2, "x", log.recorder());
  log.wait_for(1);
  EXPECT_TRUE(scheduler.cancel_queued(second));
  EXPECT_FALSE(scheduler.cancel_queued(second));
  EXPECT_FALSE(scheduler.cancel_queued(first));  // running
  EXPECT_FALSE(scheduler.cancel_queued(9999));
  EXPECT_EQ(scheduler.stats().queued, 1u);
  scheduler.finish(first, 0);
  std::vector<JobId> started = log.wait_for(2);
  EXPECT_EQ(started, (std::vector<JobId>{first, third}));
  scheduler.finish(third, 0);
  EXPECT_FALSE(scheduler.cancel_queued(third));
  EXPECT_EQ(scheduler.stats().running, 0u);
}

TEST(SchedulerTest, DrainQueuedDropsEveryQueuedJobOnce) {
  Scheduler scheduler(options(1, 64 * kGiB));
  StartLog log;
  JobId running = scheduler.submit(1, "x", log.recorder());
  std::vector<JobId> queued;
  for (int i = 0; i < 5; ++i)
    queued.push_back(scheduler.submit(static_cast<uint64_t>(1 + i % 2), "x", log.recorder()));
  log.wait_for(1);
  std::vector<JobId> dropped;
  scheduler.drain_queued([&dropped](JobId id) { dropped.push_back(id); });
  std::sort(dropped.begin(), dropped.end());
  EXPECT_EQ(dropped, queued);
  EXPECT_EQ(scheduler.stats().queued, 0u);
  EXPECT_EQ(scheduler.stats().running, 1u);
  scheduler.finish(running, 0);
  EXPECT_EQ(scheduler.stats().running, 0u);
  EXPECT_EQ(log.size(), 1u);  // nothing dropped ever started
}

TEST(SchedulerTest, FinishIsIdempotentAndIgnoresUnknownIds) {
  Scheduler scheduler(options(2, 64 * kGiB));
  StartLog log;
  JobId id = scheduler.submit(1, "x", log.recorder());
  log.wait_for(1);
  scheduler.finish(id, 0);
  scheduler.finish(id, 0);
  scheduler.finish(12345, 0);
  SchedulerStats stats = scheduler.stats();
  EXPECT_EQ(stats.running, 0u);
  EXPECT_EQ(stats.reserved_bytes, 0u);
}

TEST(SchedulerTest, ArenaWorkRunsAllItemsWithinTheBound) {
  const int jobs = 3;
  Scheduler scheduler(options(jobs, 64 * kGiB));
  std::atomic<int> done{0}, active{0}, peak{0};
  std::mutex mutex;
  std::condition_variable cv;
  for (int i = 0; i < 200; ++i) {
    scheduler.run_in_arena([&] {
      int now = ++active;
      int seen = peak.load();
      while (now > seen && !peak.compare_exchange_weak(seen, now)) {
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      --active;
      std::lock_guard lock(mutex);
      ++done;
      cv.notify_all();
    });
  }
  std::unique_lock lock(mutex);
  cv.wait(lock, [&] { return done == 200; });
  EXPECT_GE(peak.load(), 1);
  EXPECT_LE(peak.load(), jobs);
}

// Issue 16: request work runs on `jobs` threads of the scheduler's own, in
// submission order when there is one thread; exceptions are contained and
// counted as for arena work; the destructor runs what is still queued.
TEST(SchedulerTest, RequestWorkRunsWithinTheBoundAndDrainsOnDestruction) {
  std::atomic<int> active{0}, peak{0}, done{0};
  {
    const int jobs = 3;
    Scheduler scheduler(options(jobs, 64 * kGiB));
    for (int i = 0; i < 200; ++i) {
      scheduler.run_request([&] {
        int now = ++active;
        int seen = peak.load();
        while (now > seen && !peak.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        --active;
        ++done;
      });
    }
  }
  EXPECT_EQ(done.load(), 200);
  EXPECT_GE(peak.load(), 1);
  EXPECT_LE(peak.load(), 3);
}

TEST(SchedulerTest, RequestWorkIsFifoAndContainsExceptions) {
  Scheduler scheduler(options(1, kGiB));
  std::vector<int> order;  // one request thread: no lock needed between tasks
  std::promise<std::string> from_work;
  std::promise<void> finished;
  scheduler.run_request([&] { order.push_back(1); });
  scheduler.run_request([] { throw std::runtime_error("boom in request"); },
                        [&](const std::string& what) { from_work.set_value(what); });
  scheduler.run_request([] { throw 42; },
                        [](const std::string&) { throw std::runtime_error("hook"); });
  scheduler.run_request([&] {
    order.push_back(2);
    finished.set_value();
  });
  auto done = finished.get_future();
  ASSERT_EQ(done.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(from_work.get_future().get(), "boom in request");
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  EXPECT_EQ(scheduler.stats().exceptions, 2u);
}

// Issue 12: a `start` that throws must not keep its slot. With jobs=1 the
// next job could otherwise never be admitted (the client waited an hour).
TEST(SchedulerTest, AStartThatThrowsFreesItsSlot) {
  SchedulerOptions options;
  options.jobs = 1;
  options.mem_budget = kGiB;
  Scheduler scheduler(options);
  scheduler.submit(1, "cc", [](JobId) { throw std::runtime_error("boom in start"); });
  std::promise<JobId> second;
  scheduler.submit(1, "cc", [&second](JobId id) { second.set_value(id); });
  auto started = second.get_future();
  ASSERT_EQ(started.wait_for(std::chrono::seconds(30)), std::future_status::ready)
      << "the slot of the job whose start threw was never freed";
  JobId id = started.get();
  SchedulerStats stats = scheduler.stats();
  EXPECT_EQ(stats.running, 1u);
  EXPECT_EQ(stats.queued, 0u);
  scheduler.finish(id, 0);
}

TEST(SchedulerTest, ExceptionsReachTheCallersHookAndAreCounted) {
  SchedulerOptions options;
  options.jobs = 2;
  options.mem_budget = kGiB;
  Scheduler scheduler(options);
  std::promise<std::string> from_work, from_start;
  scheduler.run_in_arena([] { throw std::runtime_error("boom in work"); },
                         [&](const std::string& what) { from_work.set_value(what); });
  scheduler.submit(
      7, "cc", [](JobId) { throw std::bad_alloc(); },
      [&](const std::string& what) { from_start.set_value(what); });
  auto work = from_work.get_future();
  auto start = from_start.get_future();
  ASSERT_EQ(work.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  ASSERT_EQ(start.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(work.get(), "boom in work");
  EXPECT_EQ(start.get(), std::bad_alloc().what());
  SchedulerStats stats = scheduler.stats();
  EXPECT_EQ(stats.exceptions, 2u);
  EXPECT_EQ(stats.running, 0u);
  // A hook that throws too is contained; the arena keeps working.
  std::promise<void> after;
  scheduler.run_in_arena([] { throw 42; },
                         [](const std::string&) { throw std::runtime_error("hook"); });
  scheduler.run_in_arena([&] { after.set_value(); });
  auto done = after.get_future();
  ASSERT_EQ(done.wait_for(std::chrono::seconds(30)), std::future_status::ready);
}

TEST(SchedulerTest, DefaultsComeFromTheMachine) {
  EXPECT_GE(available_cpus(), 1);
  uint64_t budget = default_mem_budget();
  EXPECT_GT(budget, 0u);
  Scheduler scheduler(SchedulerOptions{});
  SchedulerStats stats = scheduler.stats();
  EXPECT_EQ(stats.jobs, available_cpus());
  EXPECT_GT(stats.mem_budget, 0u);
  EXPECT_EQ(stats.running, 0u);
}

}  // namespace
}  // namespace ccpool::pool
