// See supervisor.h. One thread, one signalfd, no handlers: SIGINT/SIGTERM/
// SIGHUP/SIGCHLD are blocked and read synchronously, so nothing here needs to
// be async-signal-safe.
#include "launch/supervisor.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>
#include <unordered_map>

#include "base/fs.h"
#include "base/process.h"

namespace ccpool::launch {
namespace {

using Clock = std::chrono::steady_clock;

// Descendants of the calling process, skipping the subtrees rooted at `exclude`.
std::vector<int> descendants_except(const std::set<int>& exclude) {
  std::unordered_map<int, std::vector<int>> children;
  if (DIR* dir = ::opendir("/proc")) {
    while (dirent* e = ::readdir(dir)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      int ppid = parent_pid(std::atoi(e->d_name));
      if (ppid > 0) children[ppid].push_back(std::atoi(e->d_name));
    }
    ::closedir(dir);
  }
  std::vector<int> out;
  std::vector<int> stack{static_cast<int>(::getpid())};
  while (!stack.empty()) {
    int pid = stack.back();
    stack.pop_back();
    for (int child : children[pid]) {
      if (exclude.count(child)) continue;
      out.push_back(child);
      stack.push_back(child);
    }
  }
  return out;
}

int shell_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

std::string path_lookup(const std::string& file, const std::vector<std::string>& envp) {
  if (file.find('/') != std::string::npos) return file;
  std::string path(kDefaultSearchPath);
  for (const std::string& e : envp)
    if (e.rfind("PATH=", 0) == 0) path = e.substr(5);
  std::string first_existing;
  std::string found = search_path(file, path, ".", &first_existing);
  return found.empty() ? first_existing : found;  // not executable: posix_spawn reports EACCES
}

// Owns the signal mask and the signalfd for one run; restores both.
class SignalGate {
 public:
  SignalGate() {
    sigemptyset(&m_set);
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&m_set, s);
    ::pthread_sigmask(SIG_BLOCK, &m_set, &m_old);
    m_fd = UniqueFd(::signalfd(-1, &m_set, SFD_CLOEXEC | SFD_NONBLOCK));
  }
  ~SignalGate() { ::pthread_sigmask(SIG_SETMASK, &m_old, nullptr); }
  SignalGate(const SignalGate&) = delete;
  SignalGate& operator=(const SignalGate&) = delete;

  const sigset_t& old_mask() const { return m_old; }
  const sigset_t& handled() const { return m_set; }
  bool ok() const { return static_cast<bool>(m_fd); }

  // Waits up to `timeout_ms` (-1: forever) and returns the signals read.
  std::vector<int> wait(int timeout_ms) {
    pollfd p{m_fd.get(), POLLIN, 0};
    ::poll(&p, 1, timeout_ms);
    std::vector<int> out;
    signalfd_siginfo info;
    while (::read(m_fd.get(), &info, sizeof info) == static_cast<ssize_t>(sizeof info))
      out.push_back(static_cast<int>(info.ssi_signo));
    return out;
  }

 private:
  sigset_t m_set;
  sigset_t m_old;
  UniqueFd m_fd;
};

Result<pid_t> spawn_job(const std::vector<std::string>& argv, const std::vector<std::string>& envp,
                        const SignalGate& gate) {
  std::string program = path_lookup(argv[0], envp);
  if (program.empty()) {
    return make_error(ErrorCode::kNotFound,
                      "command '" + argv[0] + "' not found in PATH; give its full path");
  }
  std::vector<char*> args = c_string_array(argv);
  std::vector<char*> env = c_string_array(envp);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setsigmask(&attr, &gate.old_mask());
  posix_spawnattr_setsigdefault(&attr, &gate.handled());
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, program.c_str(), nullptr, &attr, args.data(), env.data());
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    ErrorCode code = rc == ENOENT   ? ErrorCode::kNotFound
                     : rc == EACCES ? ErrorCode::kPermission
                                    : ErrorCode::kIo;
    return make_error(code, "cannot start '" + program + "': " + std::strerror(rc));
  }
  return pid;
}

}  // namespace

std::vector<int> list_descendants() {
  return descendants_except({});
}

Result<SuperviseResult> run_supervised(const std::vector<std::string>& argv,
                                       const std::vector<std::string>& envp,
                                       const SuperviseOptions& options) {
  if (argv.empty()) return make_error(ErrorCode::kInvalidArgument, "no command to run");
  // Children we already had (a service we started, say) are not the job's.
  std::vector<int> before = list_descendants();
  std::set<int> exclude(before.begin(), before.end());
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    return make_error(ErrorCode::kIo,
                      std::string("prctl(PR_SET_CHILD_SUBREAPER): ") + std::strerror(errno));
  }
  SignalGate gate;
  if (!gate.ok()) return make_error(ErrorCode::kIo, "signalfd failed; is /proc mounted?");
  CCPOOL_TRY_ASSIGN(pid_t job, spawn_job(argv, envp, gate));

  SuperviseResult result;
  bool job_done = false;
  bool killed_job = false;
  Clock::time_point deadline{};
  auto reap = [&] {
    int status = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
      if (pid == job) {
        job_done = true;
        result.exit_code = shell_status(status);
        killed_job = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
      }
    }
  };

  // Phase 1: wait for the job, forwarding signals, until it exits or grace ends.
  while (!job_done) {
    int timeout = -1;
    if (result.forwarded_signal) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) break;
      timeout = static_cast<int>(left.count()) + 1;
    }
    for (int sig : gate.wait(timeout)) {
      if (sig == SIGCHLD) continue;
      if (options.verbose) std::fprintf(stderr, "ccpool run: forwarding %s\n", strsignal(sig));
      ::kill(-job, sig);
      if (!result.forwarded_signal) {
        result.forwarded_signal = sig;
        deadline = Clock::now() + options.grace;
      }
    }
    reap();
  }

  // Phase 2: SIGKILL every remaining descendant until none is left, reaping all.
  std::set<int> killed;
  while (true) {
    reap();
    std::vector<int> left = descendants_except(exclude);
    if (left.empty()) break;
    ::kill(-job, SIGKILL);
    for (int pid : left) {
      if (::kill(pid, SIGKILL) == 0) killed.insert(pid);
    }
    gate.wait(20);
  }
  reap();
  killed.erase(job);
  result.killed = static_cast<int>(killed.size());
  if (!job_done) result.exit_code = 128 + SIGKILL;
  // A job we had to kill after forwarding a signal reports that signal, as a
  // shell would have had the job honoured it.
  if (killed_job && result.forwarded_signal) result.exit_code = 128 + result.forwarded_signal;
  if (options.verbose && result.killed) {
    std::fprintf(stderr, "ccpool run: killed %d leftover process(es)\n", result.killed);
  }
  return result;
}

}  // namespace ccpool::launch
