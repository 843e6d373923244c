// pool: scheduler bookkeeping overhead and process spawn+reap throughput.
//   build-*/bin/pool_bench
#include <benchmark/benchmark.h>

#include <condition_variable>
#include <mutex>

#include "pool/process_runner.h"
#include "pool/scheduler.h"

namespace {

using ccpool::pool::JobId;

// Counts completions; wait() blocks until `target` of them happened.
class Countdown {
 public:
  void reset(int64_t target) {
    std::lock_guard lock(m_mutex);
    m_left = target;
  }
  void hit() {
    std::lock_guard lock(m_mutex);
    if (--m_left == 0) m_cv.notify_all();
  }
  void wait() {
    std::unique_lock lock(m_mutex);
    m_cv.wait(lock, [this] { return m_left <= 0; });
  }

 private:
  std::mutex m_mutex;
  std::condition_variable m_cv;
  int64_t m_left = 0;
};

// submit -> admit -> start in the arena -> finish, with no process: the cost
// the scheduler adds to every job. Arg: number of clients round-robined.
void BM_SchedulerSubmitFinish(benchmark::State& state) {
  ccpool::pool::SchedulerOptions options;
  options.jobs = 2;
  options.mem_budget = 64ull << 30;
  ccpool::pool::Scheduler scheduler(options);
  const int64_t clients = state.range(0);
  const int64_t batch = 1000;
  Countdown done;
  for (auto _ : state) {
    done.reset(batch);
    for (int64_t i = 0; i < batch; ++i) {
      scheduler.submit(static_cast<uint64_t>(i % clients), "bench", [&](JobId id) {
        scheduler.finish(id, 100 * 1024);
        done.hit();
      });
    }
    done.wait();
  }
  state.SetItemsProcessed(state.iterations() * batch);
}
BENCHMARK(BM_SchedulerSubmitFinish)->Arg(1)->Arg(8)->Arg(64)->UseRealTime();

// posix_spawn + pidfd/epoll reap of /bin/true, `Arg` processes in flight.
void BM_SpawnReapTrue(benchmark::State& state) {
  ccpool::pool::ProcessRunner runner;
  ccpool::pool::SpawnSpec spec;
  spec.program = "/bin/true";
  spec.argv = {"true"};
  spec.env = {"PATH=/usr/bin:/bin"};
  const int64_t in_flight = state.range(0);
  Countdown done;
  for (auto _ : state) {
    done.reset(in_flight);
    for (int64_t i = 0; i < in_flight; ++i) {
      auto pid = runner.spawn(spec, 0, [&done](ccpool::pool::ProcessResult) { done.hit(); });
      if (!pid) {
        state.SkipWithError(pid.error().message.c_str());
        return;
      }
    }
    done.wait();
  }
  state.SetItemsProcessed(state.iterations() * in_flight);
}
BENCHMARK(BM_SpawnReapTrue)->Arg(1)->Arg(4)->Arg(16)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
