#include "compiler/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/fs.h"
#include "base/process.h"

namespace ccpool::compiler {
namespace {

// posix_spawn has no chdir before glibc 2.29's _np extension; Debian 12 has it.
Result<pid_t> spawn(const std::string& program, const std::vector<std::string>& argv,
                    const std::vector<std::string>& env, const std::string& cwd, int out_fd,
                    int err_fd) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, err_fd, 2);
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  std::vector<char*> args = c_string_array(argv);
  std::vector<char*> envp = c_string_array(env);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, program.c_str(), &actions, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return make_error(ErrorCode::kIo, "cannot run '" + program + "': " + std::strerror(rc));
  }
  return pid;
}

int wait_exit(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

Result<HelperOutput> run_helper(const std::vector<std::string>& argv,
                                const std::vector<std::string>& env, const std::string& cwd,
                                std::chrono::milliseconds timeout, const std::string& program,
                                size_t max_output) {
  if (argv.empty()) return make_error(ErrorCode::kInternal, "run_helper: empty argv");
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return make_error(ErrorCode::kIo, "pipe failed");
  UniqueFd out_r(out_pipe[0]), out_w(out_pipe[1]);
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) return make_error(ErrorCode::kIo, "pipe failed");
  UniqueFd err_r(err_pipe[0]), err_w(err_pipe[1]);
  CCPOOL_TRY_ASSIGN(pid_t pid, spawn(program.empty() ? argv[0] : program, argv, env, cwd,
                                     out_w.get(), err_w.get()));
  out_w.reset();
  err_w.reset();

  HelperOutput result;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  bool out_open = true, err_open = true, too_much = false, timed_out = false;
  while (out_open || err_open) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd fds[2] = {{out_open ? out_r.get() : -1, POLLIN, 0},
                     {err_open ? err_r.get() : -1, POLLIN, 0}};
    int n = ::poll(fds, 2, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[16384];
      ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      std::string& sink = i == 0 ? result.out : result.err;
      if (got <= 0) {
        (i == 0 ? out_open : err_open) = false;
      } else {
        sink.append(buf, static_cast<size_t>(got));
        if (sink.size() > max_output) too_much = true;
      }
    }
    if (too_much) break;
  }
  if (timed_out || too_much) ::kill(pid, SIGKILL);
  result.exit_code = wait_exit(pid);
  if (timed_out) {
    return make_error(ErrorCode::kTimeout, "helper '" + argv[0] + "' did not finish within " +
                                               std::to_string(timeout.count()) + " ms");
  }
  if (too_much) {
    return make_error(ErrorCode::kUnsupported,
                      "helper '" + argv[0] + "' printed more than 4 MiB; not a known compiler");
  }
  return result;
}

}  // namespace ccpool::compiler
