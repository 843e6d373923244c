#include "pool/process_runner.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <mutex>

#include "tests/pool/pool_test_support.h"

namespace ccpool::pool {
namespace {

using testing::eventually_gone;
using testing::process_running;
using testing::run_sync;
using testing::tool_spec;
using testing::wait_for_file;

std::pair<pid_t, pid_t> read_pids(const std::string& text) {
  std::pair<pid_t, pid_t> pids{0, 0};
  std::sscanf(text.c_str(), "%d %d", &pids.first, &pids.second);
  return pids;
}

TEST(ProcessRunnerTest, ExitCodes) {
  ProcessRunner runner;
  for (int code : {0, 3, 255}) {
    ProcessResult r = run_sync(runner, tool_spec({"exit", std::to_string(code)}));
    EXPECT_EQ(r.exit_code, code);
    EXPECT_EQ(r.term_signal, 0);
    EXPECT_FALSE(r.cancelled || r.timed_out || r.spawn_failed || r.output_overflow);
    EXPECT_TRUE(r.error.empty()) << r.error;
  }
}

TEST(ProcessRunnerTest, SignalGives128PlusN) {
  ProcessRunner runner;
  ProcessResult term = run_sync(runner, tool_spec({"raise", std::to_string(SIGTERM)}));
  EXPECT_EQ(term.term_signal, SIGTERM);
  EXPECT_EQ(term.exit_code, 128 + SIGTERM);
  ProcessResult segv = run_sync(runner, tool_spec({"raise", std::to_string(SIGSEGV)}));
  EXPECT_EQ(segv.term_signal, SIGSEGV);
  EXPECT_EQ(segv.exit_code, 128 + SIGSEGV);
}

TEST(ProcessRunnerTest, LargeBinaryOutputIsByteExactOnBothStreams) {
  ProcessRunner runner;
  const size_t bytes = (3u << 20) + 17;  // > pipe buffer: both pipes must be drained concurrently
  ProcessResult r = run_sync(runner, tool_spec({"emit", std::to_string(bytes)}));
  ASSERT_EQ(r.exit_code, 0) << r.error;
  ASSERT_EQ(r.stdout_data.size(), bytes);
  ASSERT_EQ(r.stderr_data.size(), bytes);
  size_t bad_out = 0, bad_err = 0;
  for (size_t i = 0; i < bytes; ++i) {
    bad_out += r.stdout_data[i] != static_cast<char>((i * 7 + (i >> 9)) & 0xff);
    bad_err += r.stderr_data[i] != static_cast<char>((i * 13 + 5) & 0xff);
  }
  EXPECT_EQ(bad_out, 0u);
  EXPECT_EQ(bad_err, 0u);
}

TEST(ProcessRunnerTest, CwdAndEnvironmentAreExact) {
  ProcessRunner runner;
  SpawnSpec spec = tool_spec({"env"});
  spec.env = {"A=1", "SPACED=x y", "EMPTY=", "LD_PRELOAD_NOT=z"};
  ProcessResult r = run_sync(runner, spec);
  ASSERT_EQ(r.exit_code, 0) << r.error;
  std::string expected = ccpool::testing::scratch_dir() + '\n';
  for (const std::string& e : spec.env) expected += e + '\0';
  EXPECT_EQ(r.stdout_data, expected);
}

TEST(ProcessRunnerTest, EmptyEnvironmentStaysEmpty) {
  ProcessRunner runner;
  SpawnSpec spec = tool_spec({"env"});
  spec.env.clear();
  ProcessResult r = run_sync(runner, spec);
  EXPECT_EQ(r.stdout_data, ccpool::testing::scratch_dir() + '\n');
}

TEST(ProcessRunnerTest, SpawnFailuresAreErrorsAndNeverCallOnExit) {
  ProcessRunner runner;
  std::atomic<int> calls{0};
  auto count = [&calls](ProcessResult) { ++calls; };

  SpawnSpec missing = tool_spec({});
  missing.program = ccpool::testing::scratch_dir() + "/no-such-tool";
  auto r1 = runner.spawn(missing, 0, count);
  ASSERT_FALSE(r1);
  EXPECT_EQ(r1.error().code, ErrorCode::kNotFound);
  EXPECT_NE(r1.error().message.find("no-such-tool"), std::string::npos) << r1.error().message;

  SpawnSpec bad_cwd = tool_spec({"exit", "0"});
  bad_cwd.cwd = ccpool::testing::scratch_dir() + "/missing-dir";
  auto r2 = runner.spawn(bad_cwd, 0, count);
  ASSERT_FALSE(r2);
  EXPECT_NE(r2.error().message.find("missing-dir"), std::string::npos) << r2.error().message;

  SpawnSpec relative = tool_spec({});
  relative.program = "pool_test_tool";
  auto r3 = runner.spawn(relative, 0, count);
  ASSERT_FALSE(r3);
  EXPECT_EQ(r3.error().code, ErrorCode::kInvalidArgument);

  EXPECT_EQ(runner.running_count(), 0u);
  EXPECT_EQ(calls.load(), 0);
}

TEST(ProcessRunnerTest, CancelKillsTheWholeProcessGroup) {
  ProcessRunner runner;
  std::string file = ccpool::testing::scratch_dir() + "/pids";
  std::promise<ProcessResult> done;
  auto pid = runner.spawn(tool_spec({"forkgrand", file}), 7,
                          [&done](ProcessResult r) { done.set_value(std::move(r)); });
  ASSERT_TRUE(pid) << pid.error().message;
  auto [leader, grandchild] = read_pids(wait_for_file(file));
  ASSERT_EQ(leader, *pid);
  ASSERT_GT(grandchild, 0);
  ASSERT_TRUE(process_running(grandchild));

  runner.cancel(*pid);
  ProcessResult r = done.get_future().get();
  EXPECT_TRUE(r.cancelled);
  EXPECT_EQ(r.term_signal, SIGKILL);
  EXPECT_EQ(r.exit_code, 128 + SIGKILL);
  EXPECT_NE(r.error.find("cancelled"), std::string::npos) << r.error;
  EXPECT_FALSE(process_running(leader));
  EXPECT_TRUE(eventually_gone(grandchild));
  EXPECT_EQ(runner.running_count(), 0u);
}

TEST(ProcessRunnerTest, TimeoutKillsTheGroupAndSaysSo) {
  ProcessRunner runner;
  std::string file = ccpool::testing::scratch_dir() + "/pids";
  SpawnSpec spec = tool_spec({"forkgrand", file});
  spec.timeout = std::chrono::milliseconds(300);
  ProcessResult r = run_sync(runner, spec);
  auto [leader, grandchild] = read_pids(wait_for_file(file));
  EXPECT_TRUE(r.timed_out);
  EXPECT_FALSE(r.cancelled);
  EXPECT_EQ(r.exit_code, 128 + SIGKILL);
  EXPECT_NE(r.error.find("timed out"), std::string::npos) << r.error;
  ASSERT_GT(grandchild, 0);
  EXPECT_TRUE(eventually_gone(grandchild));
}

TEST(ProcessRunnerTest, TimeoutDoesNotFireForAFastProcess) {
  ProcessRunner runner;
  SpawnSpec spec = tool_spec({"exit", "4"});
  spec.timeout = std::chrono::milliseconds(60'000);
  ProcessResult r = run_sync(runner, spec);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 4);
}

TEST(ProcessRunnerTest, GrandchildHoldingThePipeIsKilledWhenTheLeaderExits) {
  ProcessRunner runner;
  std::string file = ccpool::testing::scratch_dir() + "/pid";
  ProcessResult r = run_sync(runner, tool_spec({"orphan", file}));
  EXPECT_EQ(r.exit_code, 0);
  pid_t grandchild = std::atoi(wait_for_file(file).c_str());
  ASSERT_GT(grandchild, 0);
  EXPECT_TRUE(eventually_gone(grandchild));
}

// A tool gets stdin, stdout and stderr and nothing else of the service: not
// even a descriptor opened without O_CLOEXEC (a leaked pipe end would delay
// another job's EOF; a leaked socket or LMDB file is worse).
TEST(ProcessRunnerTest, ToolsInheritNoDescriptorOfTheService) {
  int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  int leaky = ::fcntl(null, F_DUPFD, 100);  // F_DUPFD: without FD_CLOEXEC
  ::close(null);
  ASSERT_GE(leaky, 100);
  ASSERT_EQ(::fcntl(leaky, F_GETFD) & FD_CLOEXEC, 0);
  ProcessRunner runner;
  ProcessResult r = run_sync(runner, tool_spec({"fds"}));
  ::close(leaky);
  ASSERT_EQ(r.exit_code, 0) << r.error;
  EXPECT_EQ(r.stdout_data, "0 1 2\n");
}

TEST(ProcessRunnerTest, MaxRssCoversAFiftyMegabyteProcess) {
  ProcessRunner runner;
  ProcessResult r = run_sync(runner, tool_spec({"alloc", "50"}));
  ASSERT_EQ(r.exit_code, 0) << r.error;
  EXPECT_GE(r.max_rss_kb, 40 * 1024);
  EXPECT_LT(r.max_rss_kb, 1024 * 1024);
}

TEST(ProcessRunnerTest, OutputOverflowFailsWithAClearMessage) {
  ProcessRunner runner;
  SpawnSpec spec = tool_spec({"emit", std::to_string(4u << 20)});
  spec.max_output_bytes = 64 * 1024;
  ProcessResult r = run_sync(runner, spec);
  EXPECT_TRUE(r.output_overflow);
  EXPECT_EQ(r.stdout_data.size(), 64u * 1024);
  EXPECT_LE(r.stderr_data.size(), 64u * 1024);
  EXPECT_NE(r.error.find("more than 65536 bytes"), std::string::npos) << r.error;
}

TEST(ProcessRunnerTest, NoZombiesAfterAHundredSpawns) {
  ProcessRunner runner;
  std::mutex mutex;
  std::condition_variable cv;
  int done = 0, ok = 0;
  for (int i = 0; i < 100; ++i) {
    auto pid = runner.spawn(tool_spec({"exit", std::to_string(i % 7)}), i, [&, i](ProcessResult r) {
      std::lock_guard lock(mutex);
      ok += r.exit_code == i % 7;
      ++done;
      cv.notify_all();
    });
    ASSERT_TRUE(pid) << pid.error().message;
  }
  std::unique_lock lock(mutex);
  cv.wait(lock, [&] { return done == 100; });
  EXPECT_EQ(ok, 100);
  EXPECT_EQ(runner.running_count(), 0u);
  errno = 0;
  EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

TEST(ProcessRunnerTest, TerminateAllEscalatesForASigtermIgnoringChild) {
  ProcessRunner runner;
  std::string ready = ccpool::testing::scratch_dir() + "/ready";
  std::mutex mutex;
  std::vector<ProcessResult> results;
  auto collect = [&](ProcessResult r) {
    std::lock_guard lock(mutex);
    results.push_back(std::move(r));
  };
  auto stubborn = runner.spawn(tool_spec({"ignoreterm", ready}), 1, collect);
  auto polite = runner.spawn(tool_spec({"sleep", "600000"}), 2, collect);
  ASSERT_TRUE(stubborn && polite);
  ASSERT_EQ(wait_for_file(ready), "ready");
  EXPECT_EQ(runner.running_count(), 2u);

  runner.terminate_all(std::chrono::milliseconds(200));
  // Blocks until reaped and the callbacks returned: no waiting here.
  std::lock_guard lock(mutex);
  ASSERT_EQ(results.size(), 2u);
  int sigterm = 0, sigkill = 0;
  for (const ProcessResult& r : results) {
    EXPECT_TRUE(r.cancelled);
    EXPECT_NE(r.error.find("stopping"), std::string::npos) << r.error;
    sigterm += r.term_signal == SIGTERM;
    sigkill += r.term_signal == SIGKILL;
  }
  EXPECT_EQ(sigterm, 1);
  EXPECT_EQ(sigkill, 1);
  EXPECT_EQ(runner.running_count(), 0u);
  EXPECT_FALSE(process_running(*stubborn));
}

TEST(ProcessRunnerTest, AutoReapedChildIsAFailureNotASuccess) {
  ProcessRunner runner;
  struct sigaction ignore {
  }, old{};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGCHLD, &ignore, &old), 0);
  ProcessResult r = run_sync(runner, tool_spec({"exit", "0"}));
  ::sigaction(SIGCHLD, &old, nullptr);
  EXPECT_EQ(r.exit_code, -1);
  EXPECT_NE(r.error.find("SIGCHLD"), std::string::npos) << r.error;
  EXPECT_EQ(runner.running_count(), 0u);
}

TEST(ProcessRunnerTest, RunningListsLiveProcesses) {
  ProcessRunner runner;
  std::promise<ProcessResult> done;
  SpawnSpec spec = tool_spec({"sleep", "600000"});
  auto pid = runner.spawn(spec, 42, [&done](ProcessResult r) { done.set_value(std::move(r)); });
  ASSERT_TRUE(pid);
  std::vector<RunningProcess> list = runner.running();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].pid, *pid);
  EXPECT_EQ(list[0].tag, 42u);
  EXPECT_EQ(list[0].program, spec.program);
  EXPECT_EQ(list[0].argv, spec.argv);
  EXPECT_GT(list[0].rss_kb, 0);
  runner.cancel(*pid);
  EXPECT_TRUE(done.get_future().get().cancelled);
  EXPECT_TRUE(runner.running().empty());
}

TEST(ProcessRunnerTest, DestructorKillsAndReapsEverything) {
  std::atomic<int> cancelled{0};
  pid_t pid = 0;
  {
    ProcessRunner runner;
    auto spawned = runner.spawn(tool_spec({"sleep", "600000"}), 0,
                                [&cancelled](ProcessResult r) { cancelled += r.cancelled; });
    ASSERT_TRUE(spawned);
    pid = *spawned;
  }
  EXPECT_EQ(cancelled.load(), 1);
  EXPECT_FALSE(process_running(pid));
  errno = 0;
  EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

}  // namespace
}  // namespace ccpool::pool
