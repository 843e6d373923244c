// kill_exec=N through the seam: the runner is handed its FaultInjector at
// construction (base/fault.h), so each runner counts its own spawns and a
// runner given none injects nothing, whatever CCPOOL_FAULT says.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>

#include "base/fault.h"
#include "pool/process_runner.h"
#include "tests/pool/pool_test_support.h"

namespace ccpool::pool {
namespace {

std::vector<int> signals_of_spawns(ProcessRunner& runner, int spawns) {
  std::vector<int> signals;
  for (int i = 0; i < spawns; ++i) {
    ProcessResult r = testing::run_sync(runner, testing::tool_spec({"sleep", "300"}));
    EXPECT_FALSE(r.spawn_failed) << r.error;
    signals.push_back(r.term_signal);
  }
  return signals;
}

TEST(ProcessRunnerFaultTest, KillExecKillsExactlyTheNthSpawn) {
  FaultInjector faults("kill_exec=2");
  ASSERT_TRUE(faults.enabled());
  ProcessRunner runner(faults);
  EXPECT_EQ(signals_of_spawns(runner, 3), (std::vector<int>{0, SIGKILL, 0}));
}

TEST(ProcessRunnerFaultTest, EachRunnerCountsWithItsOwnInjector) {
  FaultInjector first("kill_exec=1");
  FaultInjector second("kill_exec=1");
  ProcessRunner a(first);
  ProcessRunner b(second);
  EXPECT_EQ(signals_of_spawns(a, 2), (std::vector<int>{SIGKILL, 0}));
  EXPECT_EQ(signals_of_spawns(b, 2), (std::vector<int>{SIGKILL, 0}));
}

TEST(ProcessRunnerFaultTest, TheEnvironmentIsNotReadBelowMain) {
  ::setenv("CCPOOL_FAULT", "kill_exec=1", 1);
  ProcessRunner runner;
  EXPECT_EQ(signals_of_spawns(runner, 1), (std::vector<int>{0}));
  ::unsetenv("CCPOOL_FAULT");
}

}  // namespace
}  // namespace ccpool::pool
