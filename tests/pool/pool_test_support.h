// Helpers shared by the pool tests: the child tool, synchronous runs, and
// bounded waits on files and processes (bounded by attempts, never asserted
// as durations).
#pragma once

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "pool/process_runner.h"
#include "tests/support/scratch.h"

namespace ccpool::pool::testing {

inline std::string tool() {
  return ccpool::testing::build_binary("pool_test_tool");
}

inline SpawnSpec tool_spec(std::vector<std::string> args) {
  SpawnSpec spec;
  spec.program = tool();
  spec.argv = {"pool_test_tool"};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.env = {"PATH=/usr/bin:/bin"};
  spec.cwd = ccpool::testing::scratch_dir();
  return spec;
}

// Spawns and waits for on_exit. Fails the calling test when spawn fails.
inline ProcessResult run_sync(ProcessRunner& runner, const SpawnSpec& spec) {
  auto done = std::make_shared<std::promise<ProcessResult>>();
  auto future = done->get_future();
  auto pid = runner.spawn(spec, 0, [done](ProcessResult r) { done->set_value(std::move(r)); });
  if (!pid) {
    ProcessResult failed;
    failed.spawn_failed = true;
    failed.error = pid.error().message;
    return failed;
  }
  return future.get();
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Waits up to ~20 s for a file the tool publishes atomically.
inline std::string wait_for_file(const std::string& path) {
  for (int i = 0; i < 2000; ++i) {
    if (access(path.c_str(), F_OK) == 0) return read_text(path);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return "";
}

// Running means: exists and is not a zombie (an orphan re-parented to an init
// that does not reap would still answer kill(pid, 0)).
inline bool process_running(pid_t pid) {
  std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return false;
  size_t paren = stat.rfind(')');
  char state = paren + 2 < stat.size() ? stat[paren + 2] : 'X';
  return state != 'Z' && state != 'X';
}

// SIGKILL delivery to other processes is asynchronous: poll a bounded number of times.
inline bool eventually_gone(pid_t pid) {
  for (int i = 0; i < 1000; ++i) {
    if (!process_running(pid)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

}  // namespace ccpool::pool::testing
