#include "pool/process_runner.h"

#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <thread>

#include "base/fault.h"
#include "base/thread_annotations.h"
#include "pool/process_spawn.h"

namespace ccpool::pool {
namespace {

using Clock = std::chrono::steady_clock;

// After the leader exits its group is killed; a process that escaped the group
// (setsid) may still hold a pipe. Past this grace the pipes are closed anyway.
constexpr std::chrono::milliseconds kPipeLinger{2000};

// epoll data: (pid << 2) | kind. pids are positive and < 2^22 on Linux.
enum FdKind : uint64_t { kPidfd = 0, kStdout = 1, kStderr = 2 };
constexpr uint64_t kWakeTag = ~uint64_t{0};

uint64_t pack(pid_t pid, FdKind kind) {
  return (static_cast<uint64_t>(pid) << 2) | kind;
}

int64_t read_vm_rss_kb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6);
  }
  return 0;
}

// One child. Immutable after registration except where noted.
struct Child {
  pid_t pid = -1;
  int pidfd = -1;
  int fds[2] = {-1, -1};  // stdout, stderr read ends; reaper-only, -1 once closed
  std::string data[2];    // reaper-only
  size_t limit = 0;
  std::string program;
  std::vector<std::string> argv;
  uint64_t tag = 0;
  Clock::time_point start;
  std::optional<Clock::time_point> deadline;  // guarded by State::mutex (timeout, then pipe linger)
  std::function<void(ProcessResult)> on_exit;
  // Guarded by State::mutex: the leader is reaped only under the mutex, so a
  // kill(-pid) made while !reaped can never hit a recycled process group.
  bool reaped = false;
  bool cancelled = false, timed_out = false, overflow = false, terminated = false;
  bool lost = false;         // reaped by someone else: status unknown
  int overflow_stream = -1;  // reaper-only
  int status = 0;
  struct rusage usage {};
  Clock::time_point end;
};

}  // namespace

struct ProcessRunner::State {
  int epoll_fd = -1;
  int wake_fd = -1;  // eventfd: spawn() with a deadline, shutdown
  std::thread reaper;

  mutable Mutex mutex;
  CondVar done_cv{&mutex};  // a child finished or a callback returned
  std::map<pid_t, std::unique_ptr<Child>> children GUARDED_BY(mutex);  // erased only by the reaper
  size_t callbacks_in_flight GUARDED_BY(mutex) = 0;
  bool stopping GUARDED_BY(mutex) = false;

  bool all_done() const REQUIRES(mutex) { return children.empty() && callbacks_in_flight == 0; }

  void wake() {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd, &one, sizeof one);
  }
  void loop();
  int next_timeout_ms();
  void handle_deadlines();
  void handle_pipe(Child& child, int stream);
  void handle_exit(Child& child);
  void maybe_complete(Child& child);
  void kill_group_locked(Child& child, int sig) REQUIRES(mutex);
};

void ProcessRunner::State::kill_group_locked(Child& child, int sig) {
  if (!child.reaped) ::kill(-child.pid, sig);
}

int ProcessRunner::State::next_timeout_ms() {
  MutexLock lock(&mutex);
  std::optional<Clock::time_point> next;
  for (auto& [pid, child] : children) {
    if (child->deadline && (!next || *child->deadline < *next)) next = child->deadline;
  }
  if (!next) return -1;
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(*next - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(ms, 0, 60'000));
}

void ProcessRunner::State::handle_deadlines() {
  std::vector<Child*> lingering;
  {
    MutexLock lock(&mutex);
    auto now = Clock::now();
    for (auto& [pid, child] : children) {
      if (!child->deadline || *child->deadline > now) continue;
      child->deadline.reset();
      if (!child->reaped) {
        child->timed_out = true;
        kill_group_locked(*child, SIGKILL);
      } else {
        lingering.push_back(child.get());
      }
    }
  }
  // Pipes held past the linger by an escaped process: keep what was read.
  for (Child* child : lingering) {
    for (int s = 0; s < 2; ++s) {
      if (child->fds[s] < 0) continue;
      handle_pipe(*child, s);
      if (child->fds[s] >= 0) {
        ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, child->fds[s], nullptr);
        ::close(child->fds[s]);
        child->fds[s] = -1;
      }
    }
    maybe_complete(*child);
  }
}

void ProcessRunner::State::handle_pipe(Child& child, int stream) {
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(child.fds[stream], buf, sizeof buf);
    if (n > 0) {
      std::string& out = child.data[stream];
      size_t room = child.limit > out.size() ? child.limit - out.size() : 0;
      out.append(buf, std::min<size_t>(room, static_cast<size_t>(n)));
      if (static_cast<size_t>(n) > room && child.overflow_stream < 0) {
        child.overflow_stream = stream;
        MutexLock lock(&mutex);
        child.overflow = true;
        kill_group_locked(child, SIGKILL);
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    // EOF or a hard error: this stream is done.
    ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, child.fds[stream], nullptr);
    ::close(child.fds[stream]);
    child.fds[stream] = -1;
    return;
  }
}

void ProcessRunner::State::handle_exit(Child& child) {
  {
    MutexLock lock(&mutex);
    // The leader is a zombie, so its pid (= pgid) cannot be recycled yet: kill
    // anything left in the group (no orphans), then reap.
    ::kill(-child.pid, SIGKILL);
    pid_t r;
    do {
      r = ::wait4(child.pid, &child.status, WNOHANG, &child.usage);
    } while (r < 0 && errno == EINTR);
    if (r == 0) return;  // spurious readiness; pidfd stays registered
    // ECHILD: someone else reaped it (SIGCHLD set to SIG_IGN, a stray
    // waitpid(-1)). The status is unknown and must not read as success.
    child.lost = r < 0;
    child.reaped = true;
    child.end = Clock::now();
    child.deadline = child.end + kPipeLinger;
  }
  ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, child.pidfd, nullptr);
  ::close(child.pidfd);
  child.pidfd = -1;
  // Data already in the pipes is final; drain it now rather than waiting for
  // another epoll round.
  for (int s = 0; s < 2; ++s) {
    if (child.fds[s] >= 0) handle_pipe(child, s);
  }
}

static ProcessResult make_result(Child& child) {
  ProcessResult r;
  if (child.lost) {
    r.exit_code = -1;
    r.error =
        child.program +
        " was reaped by another waiter, so its exit status is unknown; the service must not ignore "
        "SIGCHLD or call waitpid(-1)";
    r.stdout_data = std::move(child.data[0]);
    r.stderr_data = std::move(child.data[1]);
    return r;
  }
  if (WIFEXITED(child.status)) {
    r.exit_code = WEXITSTATUS(child.status);
  } else if (WIFSIGNALED(child.status)) {
    r.term_signal = WTERMSIG(child.status);
    r.exit_code = 128 + r.term_signal;
  }
  r.timed_out = child.timed_out;
  r.cancelled = child.cancelled || child.terminated;
  r.output_overflow = child.overflow;
  r.stdout_data = std::move(child.data[0]);
  r.stderr_data = std::move(child.data[1]);
  r.max_rss_kb = child.usage.ru_maxrss;
  r.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(child.end - child.start);
  if (child.overflow) {
    r.error = child.program + " wrote more than " + std::to_string(child.limit) + " bytes to " +
              (child.overflow_stream == 0 ? "stdout" : "stderr") +
              "; its process group was killed (raise max_output_bytes if this is expected)";
  } else if (child.timed_out) {
    r.error =
        child.program +
        " timed out; its process group was killed (raise the job timeout if this is expected)";
  } else if (child.terminated) {
    r.error = child.program + " was terminated because the service is stopping";
  } else if (child.cancelled) {
    r.error = child.program + " was cancelled; its process group was killed";
  }
  return r;
}

void ProcessRunner::State::maybe_complete(Child& child) {
  if (child.pidfd >= 0 || child.fds[0] >= 0 || child.fds[1] >= 0) return;
  std::unique_ptr<Child> owned;
  {
    MutexLock lock(&mutex);
    auto it = children.find(child.pid);
    owned = std::move(it->second);
    children.erase(it);
    ++callbacks_in_flight;
  }
  ProcessResult result = make_result(*owned);
  auto on_exit = std::move(owned->on_exit);
  owned.reset();
  try {
    on_exit(std::move(result));
  } catch (...) {
    // on_exit must not throw; a throwing callback must not take the reaper down.
  }
  MutexLock lock(&mutex);
  --callbacks_in_flight;
  done_cv.signal_all();
}

void ProcessRunner::State::loop() {
  epoll_event events[64];
  for (;;) {
    int n = ::epoll_wait(epoll_fd, events, 64, next_timeout_ms());
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < n; ++i) {
      uint64_t tag = events[i].data.u64;
      if (tag == kWakeTag) {
        uint64_t value;
        [[maybe_unused]] ssize_t r = ::read(wake_fd, &value, sizeof value);
        continue;
      }
      pid_t pid = static_cast<pid_t>(tag >> 2);
      Child* child = nullptr;
      {
        MutexLock lock(&mutex);
        auto it = children.find(pid);
        if (it != children.end()) child = it->second.get();
      }
      if (child == nullptr) continue;  // completed earlier in this batch
      FdKind kind = static_cast<FdKind>(tag & 3);
      if (kind == kPidfd) {
        if (child->pidfd >= 0) handle_exit(*child);
      } else if (child->fds[kind - 1] >= 0) {
        handle_pipe(*child, kind - 1);
      }
      maybe_complete(*child);
    }
    handle_deadlines();
    MutexLock lock(&mutex);
    if (stopping && children.empty()) break;
  }
}

ProcessRunner::ProcessRunner(FaultInjector& faults)
    : m_state(std::make_unique<State>()), m_faults(faults) {
  State& s = *m_state;
  s.epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  s.wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeTag;
  ::epoll_ctl(s.epoll_fd, EPOLL_CTL_ADD, s.wake_fd, &ev);
  s.reaper = std::thread([&s] { s.loop(); });
}

ProcessRunner::~ProcessRunner() {
  State& s = *m_state;
  {
    MutexLock lock(&s.mutex);
    s.stopping = true;
    for (auto& [pid, child] : s.children) {
      child->cancelled = true;
      s.kill_group_locked(*child, SIGKILL);
    }
  }
  s.wake();
  s.reaper.join();
  ::close(s.wake_fd);
  ::close(s.epoll_fd);
}

Result<pid_t> ProcessRunner::spawn(const SpawnSpec& spec, uint64_t tag,
                                   std::function<void(ProcessResult)> on_exit) {
  FaultInjector& faults = m_faults;
  // Test-only: widens race windows. It blocks the calling thread, which in the
  // service is an arena thread that already holds this job's slot.
  if (faults.exec_delay_ms() > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(faults.exec_delay_ms()));
  }
  CCPOOL_TRY_ASSIGN(detail::SpawnedChild spawned, detail::spawn_child(spec));

  auto child = std::make_unique<Child>();
  child->pid = spawned.pid;
  child->pidfd = spawned.pidfd;
  child->fds[0] = spawned.stdout_fd;
  child->fds[1] = spawned.stderr_fd;
  child->limit = spec.max_output_bytes;
  child->program = spec.program;
  child->argv = spec.argv;
  child->tag = tag;
  child->start = Clock::now();
  if (spec.timeout.count() > 0) child->deadline = child->start + spec.timeout;
  child->on_exit = std::move(on_exit);

  State& s = *m_state;
  {
    // Registered before its fds enter epoll, so the reaper always finds it.
    MutexLock lock(&s.mutex);
    s.children.emplace(spawned.pid, std::move(child));
    if (faults.should_kill_exec()) ::kill(-spawned.pid, SIGKILL);
  }
  const std::pair<int, FdKind> fds[] = {
      {spawned.pidfd, kPidfd}, {spawned.stdout_fd, kStdout}, {spawned.stderr_fd, kStderr}};
  for (auto [fd, kind] : fds) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = pack(spawned.pid, kind);
    ::epoll_ctl(s.epoll_fd, EPOLL_CTL_ADD, fd, &ev);
  }
  if (spec.timeout.count() > 0) s.wake();
  return spawned.pid;
}

void ProcessRunner::cancel(pid_t pid) {
  State& s = *m_state;
  MutexLock lock(&s.mutex);
  auto it = s.children.find(pid);
  if (it == s.children.end() || it->second->reaped) return;
  it->second->cancelled = true;
  s.kill_group_locked(*it->second, SIGKILL);
}

void ProcessRunner::terminate_all(std::chrono::milliseconds grace) {
  State& s = *m_state;
  MutexLock lock(&s.mutex);
  for (auto& [pid, child] : s.children) {
    if (child->reaped) continue;
    child->terminated = true;
    s.kill_group_locked(*child, SIGTERM);
  }
  const Clock::time_point deadline = Clock::now() + grace;
  while (!s.all_done() && s.done_cv.wait_until(deadline)) {
  }
  if (!s.all_done()) {
    for (auto& [pid, child] : s.children) {
      child->terminated = true;
      s.kill_group_locked(*child, SIGKILL);
    }
    while (!s.all_done()) s.done_cv.wait();
  }
}

std::vector<RunningProcess> ProcessRunner::running() const {
  std::vector<RunningProcess> out;
  {
    MutexLock lock(&m_state->mutex);
    auto now = Clock::now();
    for (auto& [pid, child] : m_state->children) {
      if (child->reaped) continue;
      out.push_back(
          RunningProcess{pid, child->program, child->argv,
                         std::chrono::duration_cast<std::chrono::milliseconds>(now - child->start),
                         0, child->tag});
    }
  }
  for (RunningProcess& p : out) p.rss_kb = read_vm_rss_kb(p.pid);
  return out;
}

size_t ProcessRunner::running_count() const {
  MutexLock lock(&m_state->mutex);
  return m_state->children.size();
}

}  // namespace ccpool::pool
