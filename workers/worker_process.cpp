// See worker_process.h.
#include "workers/worker_process.h"

#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "pool/process_spawn.h"

namespace ccpool::workers {

std::string WorkerExit::describe() const {
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
                                 std::optional<Clock::time_point> deadline) {
  return write_worker_frame(m_channel.get(), kind, job_id, payload, deadline);
}

Result<WorkerFrame> WorkerProcess::receive(std::optional<Clock::time_point> deadline) {
  return read_worker_frame(m_channel.get(), deadline);
}

void WorkerProcess::kill() {
  MutexLock lock(&m_mutex);  // never after the pid is freed: see reap()
  if (!m_reaped) ::kill(-m_pid, SIGKILL);
}

WorkerExit WorkerProcess::reap(std::chrono::milliseconds grace) {
  WorkerExit out;
  pollfd p{m_pidfd.get(), POLLIN, 0};  // readable once the worker has exited
  int ready;
  while ((ready = ::poll(&p, 1, static_cast<int>(grace.count()))) < 0 && errno == EINTR) {
  }
  if (ready <= 0) kill();
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
