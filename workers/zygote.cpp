// See zygote.h.
#include "workers/zygote.h"

#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

namespace ccpool::workers {
namespace {

// The parent pid of `pid`, from /proc (0 when it cannot be read).
pid_t parent_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t name_end = text.rfind(')');  // the name may hold spaces and parentheses
  if (name_end == std::string::npos) return 0;
  std::istringstream rest(text.substr(name_end + 1));
  std::string state;
  long ppid = 0;
  rest >> state >> ppid;
  return static_cast<pid_t>(ppid);
}

// An integer member of `doc` within [lo, hi], or nullopt.
std::optional<int64_t> int_member(const nlohmann::json& doc, const char* name, int64_t lo,
                                  int64_t hi) {
  auto it = doc.find(name);
  if (it == doc.end() || !it->is_number_integer()) return std::nullopt;
  int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) return std::nullopt;
  return v;
}

}  // namespace

Result<std::shared_ptr<Zygote>> Zygote::spawn(const WorkerSpawn& spawn) {
  CCPOOL_TRY_ASSIGN(std::unique_ptr<WorkerProcess> process, WorkerProcess::start(spawn));
  return std::shared_ptr<Zygote>(new Zygote(std::move(process)));
}

Result<void> Zygote::await_hello(Clock::time_point deadline) {
  MutexLock lock(&m_mutex);
  Result<WorkerFrame> hello = m_process->receive(deadline);
  if (hello && hello->kind != WorkerFrameKind::kHello)
    hello = make_error(ErrorCode::kProtocol, "the zygote did not greet");
  if (!hello) {
    break_locked();
    return make_error(hello.error().code, hello.error().message);
  }
  return ok();
}

bool Zygote::broken() {
  MutexLock lock(&m_mutex);
  return m_broken;
}

void Zygote::break_locked() {
  // In an unknown state (a late answer would pair with the next request, a
  // late fork would leave a zombie nobody asks it to reap): it goes, and its
  // workers with it (PR_SET_PDEATHSIG); their orphans are reaped by init.
  m_broken = true;
  m_process->kill();
}

Zygote::~Zygote() {
  bool broken;
  {
    MutexLock lock(&m_mutex);
    broken = m_broken;
  }
  if (!broken) {
    [[maybe_unused]] auto sent =
        m_process->send(WorkerFrameKind::kExit, 0, {}, Clock::now() + std::chrono::seconds(2));
  }
  m_process->reap(std::chrono::milliseconds(2000));
}

Result<WorkerFrame> Zygote::call(WorkerFrameKind kind, uint64_t id, WorkerFrameKind answer,
                                 Clock::time_point deadline, int pass_fd) {
  if (m_broken) return make_error(ErrorCode::kUnreachable, "the zygote stopped answering");
  Result<WorkerFrame> frame = m_process->send(kind, id, {}, deadline, pass_fd).and_then([&] {
    return m_process->receive(deadline);
  });
  if (frame && (frame->kind != answer || frame->job_id != id))
    frame = make_error(ErrorCode::kProtocol, "the zygote answered out of turn");
  if (!frame) break_locked();
  return frame;
}

Result<std::unique_ptr<WorkerProcess>> Zygote::fork_worker(Clock::time_point deadline) {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    return make_error(ErrorCode::kIo,
                      std::string("socketpair for a worker: ") + std::strerror(errno));
  }
  UniqueFd ours(pair[0]), theirs(pair[1]);
  MutexLock lock(&m_mutex);
  uint64_t id = m_next_fork++;
  CCPOOL_TRY_ASSIGN(WorkerFrame answer, call(WorkerFrameKind::kFork, id, WorkerFrameKind::kForked,
                                             deadline, theirs.get()));
  theirs = UniqueFd();
  auto doc = nlohmann::json::parse(answer.payload, nullptr, false);
  if (doc.is_object()) {
    if (auto e = doc.find("error"); e != doc.end() && e->is_string()) {
      std::string why = e->get<std::string>().substr(0, 512);
      return make_error(ErrorCode::kIo, "the zygote could not fork a worker: " + why);
    }
  }
  std::optional<int64_t> pid =
      doc.is_object() ? int_member(doc, "pid", 2, INT_MAX) : std::optional<int64_t>();
  if (!pid) {
    break_locked();
    return make_error(ErrorCode::kProtocol, "the zygote's fork answer names no pid");
  }
  // It reaps nothing unasked, so the pid is still its child's: the pidfd pins it.
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, static_cast<pid_t>(*pid), 0));
  if (pidfd < 0) {
    break_locked();
    return make_error(ErrorCode::kProtocol, "the zygote named pid " + std::to_string(*pid) +
                                                ", which does not exist (" + std::strerror(errno) +
                                                ")");
  }
  UniqueFd pinned(pidfd);
  if (parent_of(static_cast<pid_t>(*pid)) != m_process->pid()) {
    break_locked();
    return make_error(ErrorCode::kProtocol,
                      "the zygote named pid " + std::to_string(*pid) + ", which is not its child");
  }
  return WorkerProcess::adopt(static_cast<pid_t>(*pid), std::move(pinned), std::move(ours),
                              shared_from_this());
}

std::optional<WorkerExit> Zygote::reap_child(pid_t pid) {
  MutexLock lock(&m_mutex);
  auto answer = call(WorkerFrameKind::kReap, static_cast<uint64_t>(pid), WorkerFrameKind::kReaped,
                     Clock::now() + std::chrono::seconds(10));
  if (!answer) return std::nullopt;
  auto doc = nlohmann::json::parse(answer->payload, nullptr, false);
  if (!doc.is_object()) return std::nullopt;
  std::optional<int64_t> status = int_member(doc, "status", 0, INT_MAX);
  if (!status) return std::nullopt;
  WorkerExit out;
  out.status = static_cast<int>(*status);
  out.max_rss_kb = int_member(doc, "rss_kb", 0, int64_t{1} << 40).value_or(0);
  return out;
}

}  // namespace ccpool::workers
