#include "pool/process_spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "base/process.h"

namespace ccpool::pool::detail {
namespace {

// Closes the fds it holds unless released; keeps error paths leak-free.
class FdGuard {
 public:
  FdGuard() = default;
  ~FdGuard() {
    for (int fd : m_fds) {
      if (fd >= 0) ::close(fd);
    }
  }
  FdGuard(const FdGuard&) = delete;
  FdGuard& operator=(const FdGuard&) = delete;
  void add(int fd) { m_fds.push_back(fd); }
  void release() { m_fds.clear(); }

 private:
  std::vector<int> m_fds;
};

Error spawn_error(const SpawnSpec& spec, int err) {
  std::string msg = "cannot execute " + spec.program;
  if (!spec.cwd.empty()) msg += " in directory " + spec.cwd;
  msg += ": " + std::string(std::strerror(err)) +
         "; check that the program exists and is executable and that the directory exists";
  ErrorCode code = (err == ENOENT || err == ENOTDIR) ? ErrorCode::kNotFound : ErrorCode::kIo;
  return Error(code, std::move(msg));
}

// Holds the posix_spawn attribute objects for one call.
struct SpawnSetup {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  SpawnSetup() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;
};

int configure(SpawnSetup& setup, const SpawnSpec& spec, int out_w, int err_w) {
  int rc = spec.stdin_fd >= 0
               ? posix_spawn_file_actions_adddup2(&setup.actions, spec.stdin_fd, 0)
               : posix_spawn_file_actions_addopen(&setup.actions, 0, "/dev/null", O_RDONLY, 0);
  if (rc == 0) rc = posix_spawn_file_actions_adddup2(&setup.actions, out_w, 1);
  if (rc == 0) rc = posix_spawn_file_actions_adddup2(&setup.actions, err_w, 2);
  if (rc == 0 && spec.channel_fd >= 0)
    rc = posix_spawn_file_actions_adddup2(&setup.actions, spec.channel_fd, 3);
  if (rc == 0 && !spec.cwd.empty()) {
    rc = posix_spawn_file_actions_addchdir_np(&setup.actions, spec.cwd.c_str());
  }
  // The service's own fds (sockets, LMDB, other children's pipes) must not
  // leak into tools: a leaked pipe end would delay another job's EOF.
  if (rc == 0)
    rc = posix_spawn_file_actions_addclosefrom_np(&setup.actions, spec.channel_fd >= 0 ? 4 : 3);
  if (rc != 0) return rc;

  // Threads of the service may block or ignore signals (SIGPIPE); tools start clean.
  sigset_t empty, all;
  sigemptyset(&empty);
  sigfillset(&all);
  sigdelset(&all, SIGKILL);
  sigdelset(&all, SIGSTOP);
  rc = posix_spawnattr_setsigmask(&setup.attr, &empty);
  if (rc == 0) rc = posix_spawnattr_setsigdefault(&setup.attr, &all);
  if (rc == 0) rc = posix_spawnattr_setpgroup(&setup.attr, 0);
  if (rc == 0) {
    rc = posix_spawnattr_setflags(
        &setup.attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  }
  return rc;
}

// glibc 2.36's <sys/pidfd.h> lacks extern "C", so C++ cannot link its
// pidfd_open; the raw syscall is the portable spelling.
int open_pidfd(pid_t pid) {
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
}

}  // namespace

Result<SpawnedChild> spawn_child(const SpawnSpec& spec) {
  if (spec.program.empty() || spec.program[0] != '/') {
    return make_error(ErrorCode::kInvalidArgument,
                      "program '" + spec.program + "' is not an absolute path; resolve it first");
  }
  FdGuard guard;
  int out_pipe[2] = {-1, spec.output_fd}, err_pipe[2] = {-1, spec.output_fd};
  // O_CLOEXEC: a concurrent spawn from another thread must not inherit these.
  if (spec.output_fd < 0) {
    if (::pipe2(out_pipe, O_CLOEXEC) != 0)
      return make_error(ErrorCode::kIo, std::string("pipe2: ") + std::strerror(errno));
    guard.add(out_pipe[0]);
    guard.add(out_pipe[1]);
    if (::pipe2(err_pipe, O_CLOEXEC) != 0)
      return make_error(ErrorCode::kIo, std::string("pipe2: ") + std::strerror(errno));
    guard.add(err_pipe[0]);
    guard.add(err_pipe[1]);
  }

  SpawnSetup setup;
  if (int rc = configure(setup, spec, out_pipe[1], err_pipe[1]); rc != 0) {
    return make_error(ErrorCode::kInternal, std::string("posix_spawn setup: ") + std::strerror(rc));
  }
  std::vector<std::string> argv =
      spec.argv.empty() ? std::vector<std::string>{spec.program} : spec.argv;
  std::vector<char*> c_argv = c_string_array(argv);
  std::vector<char*> c_env = c_string_array(spec.env);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, spec.program.c_str(), &setup.actions, &setup.attr, c_argv.data(),
                         c_env.data());
  if (rc != 0) return tl::unexpected(spawn_error(spec, rc));

  int pidfd = open_pidfd(pid);
  if (pidfd < 0 && errno == ESRCH) {
    // Already exited and reaped by someone else: SIGCHLD is ignored (auto-reap).
    return make_error(ErrorCode::kInternal,
                      spec.program +
                          " was reaped before it could be watched, so its exit status is unknown; "
                          "the service must not ignore SIGCHLD");
  }
  if (pidfd < 0) {
    int err = errno;
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return make_error(ErrorCode::kUnsupported, std::string("pidfd_open: ") + std::strerror(err) +
                                                   "; ccpool needs Linux >= 5.3");
  }
  guard.release();
  if (spec.output_fd >= 0) return SpawnedChild{pid, pidfd, -1, -1};
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  ::fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);
  ::fcntl(err_pipe[0], F_SETFL, O_NONBLOCK);
  return SpawnedChild{pid, pidfd, out_pipe[0], err_pipe[0]};
}

}  // namespace ccpool::pool::detail
