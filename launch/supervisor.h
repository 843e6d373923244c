// Runs a job so that nothing is left behind (Bazel process-wrapper style):
// the caller becomes a child subreaper, the job gets its own process group,
// SIGINT/SIGTERM/SIGHUP are forwarded to that group, and when the job's main
// process exits, or `grace` after the first forwarded signal, every remaining
// descendant (orphans re-parented to us, processes ignoring SIGINT, grandchildren
// in their own sessions) is SIGKILLed and reaped.
//
// Thread contract: call from the main thread of a process that has no other
// children it cares about (every descendant is killed and reaped). It blocks
// SIGINT/SIGTERM/SIGHUP/SIGCHLD in the calling thread and reads them with a
// signalfd; the previous mask is restored before returning.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "base/error.h"

namespace ccpool::launch {

struct SuperviseOptions {
  std::chrono::milliseconds grace{5000};  // after the first forwarded signal
  bool verbose = false;                   // log forwarded signals and kills to stderr
};

struct SuperviseResult {
  int exit_code = 0;         // shell convention: exit status, or 128+N for signal N
  int forwarded_signal = 0;  // first signal forwarded to the job (0: none)
  int killed = 0;            // leftover descendants SIGKILLed during cleanup (the job excluded)
};

// Starts argv[0] (PATH-searched via envp's PATH, like execvpe) with `envp`
// ("NAME=value" strings), supervises it as above and returns once no
// descendant is left. Fails (kNotFound / kPermission / kIo) when the job
// cannot be started at all; then no process is left either.
Result<SuperviseResult> run_supervised(const std::vector<std::string>& argv,
                                       const std::vector<std::string>& envp,
                                       const SuperviseOptions& options);

// Pids of every living descendant of the calling process (walks /proc/*/stat
// ppid links). Zombies are included: they still need reaping.
std::vector<int> list_descendants();

}  // namespace ccpool::launch
