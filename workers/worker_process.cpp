// See worker_process.h.
#include "workers/worker_process.h"

#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "pool/process_spawn.h"

namespace ccpool::workers {

std::string WorkerExit::describe() const {
  if (status == kUnknownStatus) return "ended (status unknown: its zygote is gone)";
  if (WIFEXITED(status)) return "exited " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "ended (status " + std::to_string(status) + ")";
}

Result<std::unique_ptr<WorkerProcess>> WorkerProcess::start(const WorkerSpawn& spawn) {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    return make_error(ErrorCode::kIo,
                      std::string("socketpair for a worker: ") + std::strerror(errno));
  }
  UniqueFd ours(pair[0]), theirs(pair[1]);
  pool::SpawnSpec spec;
  spec.program = spawn.python;
  spec.argv = spawn.argv;
  spec.env = spawn.env;
  spec.cwd = spawn.cwd;
  spec.channel_fd = theirs.get();
  spec.output_fd = spawn.output_fd;
  CCPOOL_TRY_ASSIGN(pool::detail::SpawnedChild child, pool::detail::spawn_child(spec));
  return std::unique_ptr<WorkerProcess>(
      new WorkerProcess(child.pid, UniqueFd(child.pidfd), std::move(ours)));
}

std::unique_ptr<WorkerProcess> WorkerProcess::adopt(pid_t pid, UniqueFd pidfd, UniqueFd channel,
                                                    std::shared_ptr<WorkerParent> parent) {
  return std::unique_ptr<WorkerProcess>(
      new WorkerProcess(pid, std::move(pidfd), std::move(channel), std::move(parent)));
}

WorkerProcess::~WorkerProcess() {
  bool reaped;
  {
    MutexLock lock(&m_mutex);
    reaped = m_reaped;
  }
  if (!reaped) {
    kill();
    reap();
  }
}

Result<void> WorkerProcess::send(WorkerFrameKind kind, uint64_t job_id, std::string_view payload,
                                 std::optional<Clock::time_point> deadline, int pass_fd) {
  return write_worker_frame(m_channel.get(), kind, job_id, payload, deadline, pass_fd);
}

Result<WorkerFrame> WorkerProcess::receive(std::optional<Clock::time_point> deadline) {
  return read_worker_frame(m_channel.get(), deadline);
}

void WorkerProcess::kill() {
  MutexLock lock(&m_mutex);  // never after the pid is freed: see reap()
  if (m_reaped) return;
  // An adopted worker's pid is held by its parent, which may die and leave it
  // to init: only the pidfd names it for sure.
  if (m_parent) {
    ::syscall(SYS_pidfd_send_signal, m_pidfd.get(), SIGKILL, nullptr, 0);
  } else {
    ::kill(-m_pid, SIGKILL);
  }
}

namespace {

// Waits up to `timeout` (-1: forever) for the pidfd's process to exit.
bool exited_within(int pidfd, int timeout_ms) {
  pollfd p{pidfd, POLLIN, 0};
  int ready;
  while ((ready = ::poll(&p, 1, timeout_ms)) < 0 && errno == EINTR) {
  }
  return ready > 0;
}

}  // namespace

WorkerExit WorkerProcess::reap_adopted(std::chrono::milliseconds grace) {
  if (!exited_within(m_pidfd.get(), static_cast<int>(grace.count()))) {
    kill();
    // Bounded: the parent's reap below kills its group and waits, within its
    // own deadline, for one that did not go.
    exited_within(m_pidfd.get(), 10'000);
  }
  std::optional<WorkerExit> out = m_parent->reap_child(m_pid);
  MutexLock lock(&m_mutex);
  m_reaped = true;
  return out ? *out : WorkerExit{WorkerExit::kUnknownStatus, 0};
}

WorkerExit WorkerProcess::reap(std::chrono::milliseconds grace) {
  if (m_parent) return reap_adopted(grace);
  WorkerExit out;
  // The pidfd is readable once the worker has exited.
  if (!exited_within(m_pidfd.get(), static_cast<int>(grace.count()))) kill();
  // Wait for the exit but leave the zombie: while it is unreaped its pid, and
  // so its process group id, cannot be reused, and anything the worker started
  // and left behind can be killed by group safely.
  siginfo_t info{};
  while (::waitid(P_PID, static_cast<id_t>(m_pid), &info, WEXITED | WNOWAIT) < 0 &&
         errno == EINTR) {
  }
  MutexLock lock(&m_mutex);
  ::kill(-m_pid, SIGKILL);
  rusage usage{};
  while (::wait4(m_pid, &out.status, 0, &usage) < 0 && errno == EINTR) {
  }
  out.max_rss_kb = usage.ru_maxrss;
  m_reaped = true;
  return out;
}

int64_t WorkerProcess::rss_kb() const {
  {
    MutexLock lock(&m_mutex);
    if (m_reaped) return 0;
  }
  std::ifstream status("/proc/" + std::to_string(m_pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6);
  }
  return 0;
}

}  // namespace ccpool::workers
