// ProcessRunner: spawns tool processes and reaps them without blocking any
// oneTBB worker.
//
// One reaper thread per runner owns an epoll set over, per child, a pidfd and
// the read ends of its stdout/stderr pipes, plus one eventfd (wake-ups from
// other threads); timeouts are the epoll_wait timeout to the earliest deadline. spawn() is
// non-blocking for the caller: it runs posix_spawn and hands the fds to the reaper. A child's
// result is reported once its pidfd is readable AND both pipes have reached EOF (a child may exit
// before its pipes are read; grandchildren may keep them open, in which case the group is killed
// and the pipes drained).
//
// Thread-safety: every public member may be called from any thread, except that
// the destructor must not race with other calls. on_exit callbacks run on the
// reaper thread, exactly once per successful spawn(), with no runner lock held,
// so they may call spawn()/cancel() but must stay cheap.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/fault.h"

namespace ccpool::pool {

struct SpawnSpec {
  std::string program;            // absolute path
  std::vector<std::string> argv;  // argv[0] included
  std::vector<std::string> env;   // exact environment ("K=V"); the caller already removed the shim
  std::string cwd;                // empty: the service's cwd
  std::chrono::milliseconds timeout{0};  // 0 = none; on expiry SIGKILL the whole process group
  size_t max_output_bytes = 64u << 20;   // per stream; beyond it the job fails with a clear message
  int stdin_fd = -1;  // the tool's stdin (dup'd in the child; the caller keeps it open until
                      // spawn() returns); -1: /dev/null
  // For long-lived helpers started with spawn_child() (not ProcessRunner):
  int channel_fd = -1;  // >= 0: dup'd to the child's fd 3 (its channel to the service)
  int output_fd = -1;   // >= 0: the child's stdout and stderr, instead of fresh pipes
};

struct ProcessResult {
  int exit_code = -1;   // exit status, or 128+signal when killed by a signal
  int term_signal = 0;  // the signal that ended the process, 0 when it exited
  bool timed_out = false, cancelled = false, spawn_failed = false, output_overflow = false;
  std::string stdout_data, stderr_data;  // byte-exact (truncated at max_output_bytes on overflow)
  int64_t max_rss_kb =
      0;  // wait4 ru_maxrss (covers the largest waited-for descendant, e.g. cc1plus)
  std::chrono::milliseconds elapsed{0};
  std::string error;  // human text for spawn failure / timeout / cancel / overflow
};

struct RunningProcess {
  pid_t pid;
  std::string program;
  std::vector<std::string> argv;
  std::chrono::milliseconds elapsed;
  int64_t rss_kb;  // VmRSS of the direct child now (best effort, 0 when unreadable)
  uint64_t tag;    // the caller's tag from spawn()
};

class ProcessRunner {
 public:
  // `faults` (base/fault.h; not owned, outlives this) may delay spawns and kill
  // a spawned group.
  explicit ProcessRunner(FaultInjector& faults = FaultInjector::none());
  ~ProcessRunner();  // kills (SIGKILL) and reaps everything still running, then joins the reaper
  ProcessRunner(const ProcessRunner&) = delete;
  ProcessRunner& operator=(const ProcessRunner&) = delete;

  // posix_spawn with POSIX_SPAWN_SETPGROUP (own process group), chdir to cwd,
  // stdin from spec.stdin_fd or /dev/null, stdout/stderr to pipes, every other fd closed.
  // On success on_exit runs on the reaper thread exactly once; on error it never runs.
  // A program that cannot be executed (ENOENT, EACCES, bad cwd) is an error (kNotFound/kIo).
  Result<pid_t> spawn(const SpawnSpec& spec, uint64_t tag,
                      std::function<void(ProcessResult)> on_exit);

  // SIGKILL the process group of pid; its result has cancelled=true. No-op when unknown.
  void cancel(pid_t pid);

  // SIGTERM every group, SIGKILL after grace; blocks until all are reaped and
  // their on_exit callbacks have returned. Must not be called from on_exit.
  void terminate_all(std::chrono::milliseconds grace);

  std::vector<RunningProcess> running() const;  // rss from /proc/<pid>/status VmRSS (best effort)
  size_t running_count() const;

 private:
  struct State;
  std::unique_ptr<State> m_state;
  FaultInjector& m_faults;
};

}  // namespace ccpool::pool
