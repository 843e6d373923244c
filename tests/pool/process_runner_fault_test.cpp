// CCPOOL_FAULT=kill_exec=N, in its own binary: FaultInjector reads the
// variable once per process, so it must be set before the first spawn.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>

#include "base/fault.h"
#include "pool/process_runner.h"
#include "tests/pool/pool_test_support.h"

namespace ccpool::pool {
namespace {

TEST(ProcessRunnerFaultTest, KillExecKillsExactlyTheNthSpawn) {
  ::setenv("CCPOOL_FAULT", "kill_exec=2", 1);
  ASSERT_TRUE(FaultInjector::instance().enabled()) << "FaultInjector was created before setenv";
  ProcessRunner runner;
  std::vector<int> signals;
  for (int i = 0; i < 3; ++i) {
    ProcessResult r = testing::run_sync(runner, testing::tool_spec({"sleep", "300"}));
    ASSERT_FALSE(r.spawn_failed) << r.error;
    signals.push_back(r.term_signal);
  }
  EXPECT_EQ(signals, (std::vector<int>{0, SIGKILL, 0}));
}

}  // namespace
}  // namespace ccpool::pool
