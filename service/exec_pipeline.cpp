#include "service/exec_pipeline.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <thread>

#include "base/fault.h"
#include "base/fs.h"
#include "compiler/bounded.h"
#include "service/delivery.h"

namespace ccpool::service {
namespace {

// The planner's request from the client's; its strings are moved out of `request`.
compiler::Request take_compiler_request(ipc::ExecRequest& request) {
  compiler::Request creq;
  creq.program = std::move(request.program);
  creq.argv = std::move(request.argv);
  creq.cwd = std::move(request.cwd);
  creq.env = std::move(request.env);  // the planner removes the shim from run_env
  creq.declared_inputs = std::move(request.inputs);
  creq.declared_outputs = std::move(request.outputs);
  return creq;
}

const cache::Output* find_output(const cache::Entry& entry, const std::string& name) {
  for (const auto& out : entry.outputs) {
    if (out.name == name) return &out;
  }
  return nullptr;
}

// True when the tool of `leader` wrote output `name` at `path` itself (an
// output that was not redirected into the work dir).
bool written_in_place(const compiler::Plan* leader, const std::string& name,
                      const std::string& path) {
  if (leader == nullptr) return false;
  for (const auto& spec : leader->outputs) {
    if (spec.name == name) return spec.run_path == path;
  }
  return false;
}

// Writes every output of `entry` that `plan` asks for at the plan's deliver
// paths (delivery.h says how). Where the leader's tool already wrote the file
// in place, only a regular file's mode is fixed.
// /dev/stdout, /dev/stderr, /dev/fd/N and /proc/self/... name the
// requester's own process: the service's would be its own (its stdout is
// /dev/null). Rewritten to /proc/<client pid>/..., opened in the service's
// view, whose /proc shows the client by that pid. "" when `path` is not one.
std::string requester_special_path(const std::string& path, pid_t client_pid) {
  if (client_pid <= 0) return "";
  std::string proc = "/proc/" + std::to_string(client_pid);
  if (path == "/dev/stdout") return proc + "/fd/1";
  if (path == "/dev/stderr") return proc + "/fd/2";
  if (path.rfind("/dev/fd/", 0) == 0) return proc + "/fd/" + path.substr(8);
  if (path.rfind("/proc/self/", 0) == 0) return proc + path.substr(10);
  if (path.rfind("/proc/thread-self/", 0) == 0) return "";
  return "";
}

Result<void> deliver(const compiler::Planner& planner, const compiler::Plan& plan, uint32_t umask,
                     const cache::Entry& entry, pid_t client_pid,
                     const compiler::Plan* leader = nullptr) {
  for (const auto& spec : plan.outputs) {
    const cache::Output* out = find_output(entry, spec.name);
    if (out == nullptr) {
      if (spec.optional) continue;
      return make_error(ErrorCode::kCorruption, "stored result lacks output '" + spec.name + "'");
    }
    std::optional<std::string> changed = planner.deliver_bytes(plan, spec, out->data);
    std::string_view bytes = changed ? std::string_view(*changed) : std::string_view(out->data);
    uint32_t mode = delivered_mode(out->mode, umask);
    if ((!changed || *changed == out->data) &&
        written_in_place(leader, spec.name, spec.deliver_path)) {
      struct stat st {};
      if (::stat(spec.deliver_path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
          ::chmod(spec.deliver_path.c_str(), mode) != 0) {
        return make_error(ErrorCode::kIo, "cannot chmod '" + spec.deliver_path + "'");
      }
      continue;
    }
    if (std::string special = requester_special_path(spec.deliver_path, client_pid);
        !special.empty()) {
      InView own(nullptr);
      if (!own.error().empty()) return make_error(ErrorCode::kIo, own.error());
      // As the compiler writes /dev/stdout: open (truncating a regular
      // file, as fopen "w" does) and write, whatever it is.
      UniqueFd fd(::open(special.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOCTTY));
      if (!fd)
        return make_error(ErrorCode::kIo, "cannot open '" + spec.deliver_path +
                                              "' of the requester (" + special +
                                              "): " + std::strerror(errno));
      for (size_t off = 0; off < bytes.size();) {
        ssize_t n = ::write(fd.get(), bytes.data() + off, bytes.size() - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0)
          return make_error(ErrorCode::kIo,
                            "cannot write '" + spec.deliver_path + "': " + std::strerror(errno));
        off += static_cast<size_t>(n);
      }
      continue;
    }
    CCPOOL_TRY(write_output(spec.deliver_path, bytes, mode));
  }
  return ok();
}

// Per-reason counts: the service's own (status) and the store's (persistent,
// `ccpool cache stats`).
void count_reason(ExecPipeline::Deps& deps, std::string_view kind, const std::string& code) {
  const std::string& c = code.empty() ? std::string("unknown") : code;
  (kind == "passthrough" ? deps.counters.passthrough_reasons : deps.counters.not_stored_reasons)
      .add(c);
  deps.storage.local().count_event(std::string(kind) + ":" + c);
}

ipc::ExecReply completed(const cache::Entry& entry, ipc::CacheOutcome outcome) {
  ipc::ExecReply reply;
  reply.status = ipc::ExecStatus::kCompleted;
  reply.exit_code = entry.exit_code;
  reply.stdout_data = entry.stdout_data;
  reply.stderr_data = entry.stderr_data;
  reply.outcome = outcome;
  return reply;
}

ipc::ExecReply failed_reply(const std::string& message) {
  ipc::ExecReply reply;
  reply.status = ipc::ExecStatus::kFailed;
  reply.message = message;
  return reply;
}

}  // namespace

ExecPipeline::ExecPipeline(Deps deps) : m_deps(std::move(deps)) {}

ExecPipeline::~ExecPipeline() = default;

void ExecPipeline::send(const Waiter& waiter, ipc::ExecReply reply) {
  int64_t delay = m_deps.faults.reply_delay_ms();
  if (delay > 0) {
    spdlog::warn("fault injection: delaying a reply by {} ms", delay);
    std::thread([this, conn = waiter.conn_id, reply = std::move(reply), delay]() mutable {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay));
      m_deps.reply(conn, std::move(reply));
    }).detach();
    return;
  }
  m_deps.reply(waiter.conn_id, std::move(reply));
}

void ExecPipeline::submit(uint64_t conn_id, pid_t peer_pid, ipc::ExecRequest request,
                          UniqueFd stdin_fd, bool quiet) {
  ++m_deps.counters.requests;
  if (m_stopping) {
    ++m_deps.counters.stopping_replies;
    ipc::ExecReply reply;
    reply.status = ipc::ExecStatus::kStopping;
    reply.message = "the ccpool service is stopping";
    m_deps.reply(conn_id, std::move(reply));
    return;
  }
  auto received = std::chrono::steady_clock::now();
  // Handing a request to a request thread costs a wake-up of that thread
  // (BENCHMARKS.md, "hand-offs"): when nothing else waits for the I/O thread
  // and no request thread is busy, a hit is served here. Fault injection
  // targets the request threads, so it turns this off.
  // A plan the I/O thread made (it declined nothing) goes on with the request.
  std::optional<Planned> planned;
  if (quiet && m_deps.hits_on_io_thread && m_pending.load() == 0 && !m_deps.faults.enabled() &&
      serve_on_io_thread(conn_id, peer_pid, request, received, &planned)) {
    return;
  }
  ++m_pending;
  auto shared_stdin = std::make_shared<UniqueFd>(std::move(stdin_fd));
  // On a request thread, not in the arena: a hit (plan, lookup, delivery)
  // never waits for a tool, and arena tasks make oneTBB's idle workers spin.
  m_deps.scheduler.run_request(
      [this, conn_id, peer_pid, received, shared_stdin, request = std::move(request),
       planned = std::move(planned)]() mutable {
        PendingGuard pending(m_pending);
        if (m_deps.faults.should_throw_in_request()) {
          throw std::runtime_error("injected by CCPOOL_FAULT=throw_in_request");
        }
        handle(conn_id, peer_pid, std::move(request), std::move(shared_stdin), received,
               std::move(planned));
      },
      [this, conn_id](const std::string& what) { fail_request(conn_id, what); });
}

void ExecPipeline::fail_request(uint64_t conn_id, const std::string& what) {
  ++m_deps.counters.service_errors;
  spdlog::error("internal error while handling a request: {}", what);
  m_deps.reply(conn_id, failed_reply("ccpool internal error: " + what + "; the tool runs locally"));
  // Drop its waiter from any flight it joined. A flight left without waiters
  // is cancelled as on a disconnect; one that was never scheduled (the
  // exception came before lead()) is unlinked at once, or every identical
  // request after it would join it and wait for nothing.
  for (auto& flight : m_flights.remove_connection(conn_id)) {
    if (flight->job == 0 && flight->pid == 0) {
      m_flights.complete(flight);  // a lease thread or start() still running sees `cancelled`
    } else if (m_deps.scheduler.cancel_queued(flight->job)) {
      ++m_deps.counters.cancelled;
      m_flights.complete(flight);
      if (flight->lease_held) m_deps.tier->release_lease(flight->key);
    } else if (flight->pid > 0) {
      m_deps.runner.cancel(flight->pid);
    }
  }
}

void ExecPipeline::handle(uint64_t conn_id, pid_t peer_pid, ipc::ExecRequest request,
                          std::shared_ptr<UniqueFd> stdin_fd,
                          std::chrono::steady_clock::time_point received,
                          std::optional<Planned> planned) {
  HitTimer timer(received);
  timer.mark(HitStage::kHandoff);
  compiler::Request creq = take_compiler_request(request);

  // A requester in another mount namespace (or root) is served inside its
  // own view, or told to run the tool itself (service/mount_view.h). A plan
  // the I/O thread made was made in the service's own view.
  Result<std::shared_ptr<const MountView>> view =
      planned ? std::shared_ptr<const MountView>() : MountView::of_peer(peer_pid);
  if (!view) {
    ++m_deps.counters.passthrough;
    count_reason(m_deps, "passthrough", "foreign_view_unavailable");
    spdlog::info("pass-through foreign_view_unavailable: {}", view.error().message);
    m_deps.reply(conn_id, failed_reply("ccpool cannot serve this request in its own view: " +
                                       view.error().message + "; the tool runs locally"));
    return;
  }
  // The work dir must exist where the tool runs: in a foreign view, under
  // its /tmp (created at start, mode 0700, never reused).
  std::string work_dir;
  Result<compiler::Plan> plan = make_error(ErrorCode::kInternal, "not planned");
  if (planned) {
    work_dir = std::move(planned->work_dir);
    plan = std::move(planned->plan);
  } else {
    work_dir = *view ? "/tmp/.ccpool-" + std::to_string(::getpid()) + "-" +
                           std::to_string(::getuid()) + "-j" + std::to_string(++m_work_seq)
                     : m_deps.work_root + "/j" + std::to_string(++m_work_seq);
    // Inside a view only filesystem work runs (no call that may start a
    // thread: a new thread would share this thread's view).
    InView in_view(view->get());
    plan = m_deps.planner.plan(creq, work_dir);
  }
  if (!plan) {
    ++m_deps.counters.service_errors;
    spdlog::warn("cannot plan '{}': {}", creq.program, plan.error().message);
    m_deps.reply(conn_id,
                 failed_reply("ccpool could not plan this command: " + plan.error().message));
    return;
  }

  Waiter waiter;
  waiter.conn_id = conn_id;
  waiter.client_pid = peer_pid;
  waiter.umask = request.umask;
  waiter.plan = std::move(*plan);
  waiter.program = std::move(creq.program);
  waiter.work_dir = std::move(work_dir);
  waiter.argv = std::move(creq.argv);
  waiter.view = std::move(*view);
  waiter.received = received;
  bool cacheable = waiter.plan.kind != compiler::PlanKind::kPassthrough;
  if (!cacheable) {
    ++m_deps.counters.passthrough;
    count_reason(m_deps, "passthrough", waiter.plan.reason_code);
    spdlog::debug("pass-through {} {}: {}", waiter.plan.reason_code, waiter.plan.tool,
                  waiter.plan.reason);
  } else {
    timer.mark(HitStage::kPlan);
    Served served = serve_from_store(waiter, false, &timer);
    // Only node-store hits are timed: `hits` counts exactly those.
    if (served == Served::kNodeHit) {
      m_deps.counters.hit_latency.observe_since(received);
      m_deps.counters.add_hit_stages(timer);
    }
    if (served != Served::kNothing) return;
  }
  waiter.fairness_id = fairness_id(request.rank, peer_pid);  // reads /proc: only for misses
  join_or_lead(std::move(waiter), cacheable, cacheable ? nullptr : std::move(stdin_fd));
}

bool ExecPipeline::serve_on_io_thread(uint64_t conn_id, pid_t peer_pid,
                                      const ipc::ExecRequest& request,
                                      std::chrono::steady_clock::time_point received,
                                      std::optional<Planned>* planned) {
  try {
    HitTimer timer(received);
    timer.mark(HitStage::kHandoff);  // none: about zero
    // The service's own view only: a foreign one is entered with setns(2),
    // which the I/O thread must never do.
    Result<std::shared_ptr<const MountView>> view = MountView::of_peer(peer_pid);
    if (!view || *view) return false;
    ipc::ExecRequest copy = request;  // the request thread needs it whole if this declines
    compiler::Request creq = take_compiler_request(copy);
    // Nothing that can wait long: no helper process, no large read, no answer
    // the memo does not vouch for (compiler/bounded.h).
    compiler::BoundedScope bounded;
    std::string work_dir = m_deps.work_root + "/j" + std::to_string(++m_work_seq);
    Result<compiler::Plan> plan = m_deps.planner.plan(creq, work_dir);
    if (bounded.declined() || !plan) return false;
    if (plan->kind == compiler::PlanKind::kPassthrough) {
      *planned = Planned{std::move(*plan), std::move(work_dir)};
      return false;
    }
    timer.mark(HitStage::kPlan);
    Waiter waiter;
    waiter.conn_id = conn_id;
    waiter.client_pid = peer_pid;
    waiter.umask = request.umask;
    waiter.plan = std::move(*plan);
    waiter.received = received;
    Served served = serve_from_store(waiter, false, &timer, true);
    if (served == Served::kNodeHit) {
      ++m_deps.counters.hits_on_io_thread;
      m_deps.counters.hit_latency.observe_since(received);
      m_deps.counters.add_hit_stages(timer);
    }
    // Declined at the lookup or the delivery, or not in the store: the plan
    // stands (no system call of it waited on anything the scope refuses).
    if (served == Served::kNothing) *planned = Planned{std::move(waiter.plan), std::move(work_dir)};
    return served != Served::kNothing;
  } catch (const std::exception& e) {
    // As on a request thread (run_guarded): answered, never thrown at the loop.
    fail_request(conn_id, e.what());
    return true;
  }
}

// A hit: the waiter's own plan validated against the stored manifest, then
// the entry from the node store or, through it, the cluster tier.
// `made_remotely`: the caller knows another node made the entry (a lease wait).
ExecPipeline::Served ExecPipeline::serve_from_store(const Waiter& waiter, bool made_remotely,
                                                    HitTimer* timer, bool bounded) {
  auto mark = [timer](HitStage stage) {
    if (timer) timer->mark(stage);
  };
  InView in_view(waiter.view.get());
  if (!in_view.error().empty()) return Served::kNothing;
  auto key = m_deps.planner.lookup(waiter.plan, manifests(bounded));
  mark(HitStage::kLookup);
  if (!key) {
    spdlog::warn("manifest lookup failed: {}", key.error().message);
    return Served::kNothing;
  }
  if (!*key) return Served::kNothing;
  if (bounded) {
    // The sizes first, without the bodies: a large delivery is a request thread's.
    std::optional<Found> head = m_deps.storage.get_local(**key, Bodies::kWithout, Touch::kPeek);
    if (!head) return Served::kNothing;
    uint64_t bytes = 0;
    for (const cache::Output& out : head->entry.outputs) bytes += out.size;
    if (bytes > kMaxIoThreadDelivery) return Served::kNothing;
    // Only regular files or new ones: a write to a FIFO, a terminal or the
    // requester's stdout can block.
    for (const compiler::OutputSpec& spec : waiter.plan.outputs) {
      if (!requester_special_path(spec.deliver_path, waiter.client_pid).empty())
        return Served::kNothing;
      struct stat st {};
      if (::stat(spec.deliver_path.c_str(), &st) == 0 ? !S_ISREG(st.st_mode) : errno != ENOENT)
        return Served::kNothing;
    }
  }
  std::optional<Found> found =
      bounded ? m_deps.storage.get_local(**key) : m_deps.storage.get(**key);
  mark(HitStage::kFetch);
  if (!found || found->entry.kind != cache::EntryKind::kCompile) return Served::kNothing;
  bool remote = made_remotely || found->source == Source::kRemote;
  auto delivered =
      deliver(m_deps.planner, waiter.plan, waiter.umask, found->entry, waiter.client_pid);
  mark(HitStage::kDeliver);
  if (!delivered) {
    ++m_deps.counters.service_errors;
    spdlog::warn("cannot deliver a hit: {}", delivered.error().message);
    send(waiter, failed_reply("ccpool could not write the outputs: " + delivered.error().message));
    return Served::kFailed;
  }
  ++(remote ? m_deps.counters.remote_hits : m_deps.counters.hits);
  send(waiter,
       completed(found->entry, remote ? ipc::CacheOutcome::kRemoteHit : ipc::CacheOutcome::kHit));
  mark(HitStage::kReply);
  return remote ? Served::kRemoteHit : Served::kNodeHit;
}

namespace {

// A flight that runs `waiter`'s own plan, complete before it is published.
std::shared_ptr<Flight> flight_for(const Waiter& waiter) {
  auto flight = std::make_shared<Flight>();
  flight->key = waiter.plan.flight_key;
  flight->plan = waiter.plan;
  flight->program = waiter.program;
  flight->work_dir = waiter.work_dir;
  flight->view = waiter.view;
  flight->waiters_argv = waiter.argv;
  flight->fairness_id = waiter.fairness_id;
  flight->received = waiter.received;
  return flight;
}

}  // namespace

void ExecPipeline::join_or_lead(Waiter waiter, bool shareable, std::shared_ptr<UniqueFd> stdin_fd) {
  std::shared_ptr<Flight> flight = flight_for(waiter);
  flight->stdin_fd = std::move(stdin_fd);
  bool cacheable = flight->plan.kind != compiler::PlanKind::kPassthrough;
  auto joined = m_flights.join_or_lead(std::move(flight), shareable, std::move(waiter));
  if (!joined.leader) {
    ++m_deps.counters.joins;
    return;
  }
  if (cacheable) ++m_deps.counters.misses;
  lead(joined.flight);
}

// A joiner whose inputs differ from the leader's runs its own plan, in a
// flight nobody joins, so it runs at most once more.
void ExecPipeline::rerun(Waiter waiter) {
  ++m_deps.counters.join_reruns;
  std::shared_ptr<Flight> flight = flight_for(waiter);
  auto joined = m_flights.join_or_lead(std::move(flight), false, std::move(waiter));
  schedule(joined.flight);
}

void ExecPipeline::lead(const std::shared_ptr<Flight>& flight) {
  bool cacheable = flight->plan.kind != compiler::PlanKind::kPassthrough;
  if (!cacheable || m_deps.tier == nullptr) {
    schedule(flight);
    return;
  }
  // Cross-node single-flight: waiting on another node's lease must not park
  // an arena worker, so the lease dance runs on a thread of its own. It waits
  // in short slices so that shutdown never waits on it for long.
  ++m_lease_threads;
  std::thread([this, flight] {
    lease_then_schedule(flight);
    --m_lease_threads;
  }).detach();
}

void ExecPipeline::lease_then_schedule(const std::shared_ptr<Flight>& flight) {
  auto state = m_deps.tier->acquire_lease(flight->key);
  // Another node's lease is waited on for at most lease_wait_max, however
  // long its holder keeps renewing it; then this node compiles itself.
  auto give_up = std::chrono::steady_clock::now() + m_deps.tier->lease_wait_max();
  while (state == remote::LeaseState::kHeldByOther && !m_stopping &&
         !m_flights.is_cancelled(flight) && std::chrono::steady_clock::now() < give_up) {
    // The holder writes the result (and, in direct mode, the manifest under
    // the flight key) before it releases the lease.
    auto value = m_deps.tier->wait_for_result(flight->key, std::chrono::milliseconds(500));
    if (value) {
      if (m_deps.storage.adopt_packed(flight->key, *value) && complete_from_store(flight)) return;
      break;  // not usable here (e.g. the manifest does not validate): compile locally
    }
    // No value yet: the wait slice ended, or the holder died and its lease expired.
    state = m_deps.tier->acquire_lease(flight->key);
  }
  if (state == remote::LeaseState::kAcquired) flight->lease_held = true;
  if (m_stopping || m_flights.is_cancelled(flight)) {
    m_flights.complete(flight);  // waiters, if any, were answered by stop_all()
    retire(*flight);
    return;
  }
  if (!flight->lease_held) {
    flight->lease_held = m_deps.tier->acquire_lease(flight->key) == remote::LeaseState::kAcquired;
  }
  schedule(flight);
}

// Another node's result arrived under the flight key. It completes the flight
// only if the leader's own view validates; then every waiter is served like a
// hit, and one whose view does not validate runs its own compile.
bool ExecPipeline::complete_from_store(const std::shared_ptr<Flight>& flight) {
  std::optional<Result<std::optional<Digest>>> looked;
  {
    InView in_view(flight->view.get());
    if (!in_view.error().empty()) return false;
    looked = m_deps.planner.lookup(flight->plan, manifests());
  }
  auto& key = *looked;
  if (!key || !*key) return false;
  std::optional<Found> found = m_deps.storage.get(**key, Bodies::kWithout, Touch::kPeek);
  if (!found || found->entry.kind != cache::EntryKind::kCompile) return false;
  std::vector<Waiter> waiters = m_flights.complete(flight);
  retire(*flight);
  for (auto& w : waiters) {
    if (serve_from_store(w, true) == Served::kNothing) rerun(std::move(w));
  }
  return true;
}

void ExecPipeline::schedule(const std::shared_ptr<Flight>& flight) {
  pool::JobId job = m_deps.scheduler.submit(
      flight->fairness_id, flight->plan.job_class,
      [this, flight](pool::JobId id) { start(flight, id); },
      [this, flight](const std::string& what) {
        fail_flight(flight, "ccpool internal error: " + what);
      });
  // start() may already have run; recording the same id again is harmless. If
  // every waiter left before the id was known, drop the queued job here.
  if (!m_flights.set_job(flight, job) && m_deps.scheduler.cancel_queued(job)) {
    ++m_deps.counters.cancelled;
    m_flights.complete(flight);
    retire(*flight);
  }
}

void ExecPipeline::start(const std::shared_ptr<Flight>& flight, pool::JobId job) {
  if (m_deps.faults.should_throw_in_start()) {
    throw std::runtime_error("injected by CCPOOL_FAULT=throw_in_start");
  }
  if (!m_flights.set_job(flight, job)) {
    m_deps.scheduler.finish(job, 0);
    pool::ProcessResult cancelled;
    cancelled.cancelled = true;
    finish_flight(flight, std::move(cancelled));
    return;
  }
  const compiler::Plan& plan = flight->plan;
  // The tool starts in the leader's view; its work dir and record are there.
  // Only filesystem work and the spawn run inside it (no call that may start
  // a thread): failures are answered after leaving it.
  std::string failure;
  Result<pid_t> pid = make_error(ErrorCode::kInternal, "not started");
  pool::SpawnSpec spec;
  spec.program = plan.run_program.empty() ? flight->program : plan.run_program;
  spec.argv = plan.run_argv;
  spec.env = plan.run_env;
  spec.cwd = plan.run_cwd;
  spec.timeout = m_deps.job_timeout;
  if (flight->stdin_fd && *flight->stdin_fd) spec.stdin_fd = flight->stdin_fd->get();
  {
    InView in_view(flight->view.get());
    if (!in_view.error().empty()) {
      failure = "ccpool cannot enter the requester's view: " + in_view.error();
    } else if (plan.uses_work_dir && ::mkdir(flight->work_dir.c_str(), 0700) != 0 &&
               (errno != EEXIST || flight->view)) {
      failure =
          "ccpool cannot create its work dir '" + flight->work_dir + "': " + std::strerror(errno);
    } else if (!plan.trace_path.empty()) {
      // The recorder opens it O_APPEND and never creates it (trace/trace.c).
      int fd = ::open(plan.trace_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                      0600);
      if (fd < 0)
        failure = "ccpool cannot create the record file '" + plan.trace_path +
                  "': " + std::strerror(errno);
      if (fd >= 0) ::close(fd);
    }
    if (failure.empty() && !plan.seeds.empty()) {
      // An archive that ar or ranlib updates: the run rewrites a copy.
      std::string why = compiler::copy_seed_files(plan);
      if (!why.empty()) failure = "ccpool could not prepare the run: " + why;
    }
    if (failure.empty()) {
      flight->started = std::chrono::system_clock::now();
      flight->spawned = std::chrono::steady_clock::now();
      pid = m_deps.runner.spawn(spec, flight->id, [this, flight, job](pool::ProcessResult result) {
        flight->exited = std::chrono::steady_clock::now();
        m_deps.scheduler.finish(job, result.max_rss_kb);
        auto post = [this, flight, result = std::move(result)]() mutable {
          m_deps.scheduler.run_in_arena(
              [this, flight, result = std::move(result)]() mutable {
                finish_flight(flight, std::move(result));
              },
              [this, flight](const std::string& what) {
                fail_flight(flight, "ccpool internal error: " + what);
              });
        };
        int64_t delay = m_deps.faults.finish_delay_ms();
        if (delay <= 0) {
          post();
          return;
        }
        spdlog::warn("fault injection: holding a finished job for {} ms", delay);
        ++m_deps.counters.fault_holds;
        ++m_lease_threads;  // counted as pending work until it is posted
        std::thread([this, delay, post = std::move(post)]() mutable {
          std::this_thread::sleep_for(std::chrono::milliseconds(delay));
          post();
          --m_lease_threads;
        }).detach();
      });
    }
  }
  if (!failure.empty()) {
    m_deps.scheduler.finish(job, 0);
    fail_flight(flight, failure);
    return;
  }
  if (!pid) {
    m_deps.scheduler.finish(job, 0);
    fail_flight(flight, "ccpool could not start '" + spec.program + "': " + pid.error().message);
    return;
  }
  ++m_deps.counters.executions;
  if (!m_flights.set_running(flight, *pid)) m_deps.runner.cancel(*pid);
}

void ExecPipeline::fail_flight(const std::shared_ptr<Flight>& flight, const std::string& message) {
  ++m_deps.counters.service_errors;
  spdlog::warn("{}", message);
  for (auto& w : m_flights.complete(flight)) send(w, failed_reply(message));
  retire(*flight);
}

// The one place a flight's resources go: its work dir and its cross-node
// lease. Idempotent.
void ExecPipeline::retire(Flight& flight) {
  if (flight.retired.exchange(true)) return;
  if (flight.plan.uses_work_dir && !flight.work_dir.empty()) {
    InView in_view(flight.view.get());
    if (in_view.error().empty()) remove_tree(flight.work_dir);
  }
  if (flight.lease_held.exchange(false)) m_deps.tier->release_lease(flight.key);
}

// Three steps: collect what the run produced, store it (result first, then
// the manifest naming it), deliver it to each waiter whose view validates.
// The flight leaves the table only after the store, so a request arriving in
// between either joins or finds the stored result.
void ExecPipeline::finish_flight(const std::shared_ptr<Flight>& flight,
                                 pool::ProcessResult result) {
  if (result.cancelled) {
    ++m_deps.counters.cancelled;
    spdlog::info("cancelled {} (every waiter left)", flight->plan.tool);
    m_flights.complete(flight);  // no waiter unless stopping, which already replied
    retire(*flight);
    return;
  }
  MissTimer timer(flight->received);
  timer.mark_at(MissStage::kStart, flight->spawned);
  timer.mark_at(MissStage::kRun, flight->exited);
  timer.mark(MissStage::kHandoff);
  RunOutcome run;
  {
    InView in_view(flight->view.get());  // the outputs and the record are in the leader's view
    run = collect(*flight, std::move(result));
  }
  timer.mark(MissStage::kCollect);
  bool stored = run.success && run.conclusion.finished.store && store(*flight, run);
  timer.mark(MissStage::kStore);
  deliver_run(*flight, run, m_flights.complete(flight));
  timer.mark(MissStage::kDeliver);
  retire(*flight);
  // Only flights that ran from a request of their own (not a lease wait's
  // adoption, not a cancelled run) and stored what they made.
  if (stored && flight->received != std::chrono::steady_clock::time_point{})
    m_deps.counters.add_miss_stages(timer);
}

ExecPipeline::RunOutcome ExecPipeline::collect(const Flight& flight, pool::ProcessResult result) {
  const compiler::Plan& plan = flight.plan;
  RunOutcome run;
  run.success = result.exit_code == 0 && !result.timed_out && !result.output_overflow;
  if (!run.success) {
    ++m_deps.counters.failures;
    if (!result.error.empty()) result.stderr_data += "ccpool: " + result.error + "\n";
  }
  cache::Entry& entry = run.entry;
  entry.kind = cache::EntryKind::kCompile;
  entry.exit_code = result.exit_code;
  entry.stdout_data = std::move(result.stdout_data);
  entry.stderr_data = std::move(result.stderr_data);
  entry.time_saved_ms = static_cast<uint64_t>(result.elapsed.count());
  entry.tool = plan.tool;
  entry.argv = flight.waiters_argv;
  entry.cwd = plan.run_cwd;
  entry.inputs = plan.inputs;
  if (plan.kind == compiler::PlanKind::kPassthrough) return run;

  // Read the outputs, let the planner conclude, count why not stored.
  compiler::RunFacts facts;
  facts.started = flight.started;
  facts.success = run.success;
  for (const auto& spec : plan.outputs) {
    if (!run.success) break;
    auto data = read_file(spec.run_path);
    if (!data) {
      if (!spec.optional) facts.outputs_complete = false;
      continue;
    }
    struct stat st {};
    ::stat(spec.run_path.c_str(), &st);
    facts.outputs.emplace_back(spec.name, *data);
    entry.outputs.push_back(cache::Output{
        spec.name, static_cast<uint32_t>(st.st_mode & 0777), 0, {}, std::move(*data)});
  }
  facts.stdout_data = entry.stdout_data;
  facts.stderr_data = entry.stderr_data;
  compiler::ManifestStorage storage = manifests();
  storage.save = [this](const Digest& key, const std::string& bytes) {
    // A blob not tied to this result (nvcc's manifest under its
    // preprocessor key): stored now.
    cache::Entry blob;
    blob.kind = cache::EntryKind::kBlob;
    blob.label = "manifest";
    blob.outputs.push_back(cache::Output{"manifest", 0644, 0, {}, bytes});
    if (auto put = m_deps.storage.put(key, blob); !put) {
      spdlog::warn("cannot store a manifest: {}", put.error().message);
    }
  };
  run.conclusion = m_deps.planner.conclude(plan, facts, storage);
  const compiler::Finished& finished = run.conclusion.finished;
  if (run.success && !finished.store) {
    ++m_deps.counters.not_stored;
    count_reason(m_deps, "not_stored", finished.why_not_code);
    spdlog::info("not stored {} {}: {}", finished.why_not_code, plan.tool, finished.why_not);
  }
  return run;
}

bool ExecPipeline::store(const Flight& flight, const RunOutcome& run) {
  if (m_deps.faults.should_fail_store_write()) {
    spdlog::warn("fault injection: failing a store write");
    ++m_deps.counters.store_errors;
    return false;
  }
  // The result and the manifest naming it, in one commit (a miss pays one
  // fsync, and no reader sees one without the other).
  std::vector<cache::GroupCommitter::PutRef> puts{{run.conclusion.finished.result_key, run.entry}};
  cache::Entry blob;
  if (run.conclusion.manifest) {
    blob.kind = cache::EntryKind::kBlob;
    blob.label = "manifest";
    blob.outputs.push_back(cache::Output{"manifest", 0644, 0, {}, *run.conclusion.manifest});
    puts.push_back({flight.key, blob});
  }
  std::vector<Result<void>> put = m_deps.storage.put_all(puts);
  bool manifest_stored = put.size() > 1 && put[1];
  if (!put[0]) {
    spdlog::warn("cannot store a result (carrying on without caching): {}", put[0].error().message);
    ++m_deps.counters.store_errors;
    // A full map can split the pair and commit the manifest alone: one that
    // names no result only misses, but it is not left behind.
    if (manifest_stored) (void)m_deps.storage.local().remove(flight.key);
    return false;
  }
  if (put.size() > 1 && !manifest_stored) {
    spdlog::warn("cannot store a manifest: {}", put[1].error().message);
    ++m_deps.counters.store_errors;
  }
  return true;
}

// A joiner may take the leader's result only if that result is the one a
// compile of its own would be keyed by: for direct mode, its own view of the
// inputs (cwd, search path, headers, PCHs) validates against the manifest
// the leader's run produced; for content-keyed plans, the flight key is the
// result key and finish() vouched that the inputs did not change.
bool ExecPipeline::joiner_matches(const Waiter& waiter, const RunOutcome& run) {
  return m_deps.planner.accepts(waiter.plan, run.conclusion);
}

void ExecPipeline::deliver_run(const Flight& flight, const RunOutcome& run,
                               std::vector<Waiter> waiters) {
  bool cacheable = flight.plan.kind != compiler::PlanKind::kPassthrough;
  for (auto& w : waiters) {
    bool matches = w.leader;
    if (!matches) {
      InView in_view(w.view.get());  // each joiner validates in its own view
      matches = in_view.error().empty() && joiner_matches(w, run);
    }
    if (!matches) {
      // Its inputs differ, or the run proved nothing (inputs changed during
      // it): a hit if the store has its result, else its own compile.
      if (!cacheable || serve_from_store(w) == Served::kNothing) rerun(std::move(w));
      continue;
    }
    auto outcome = !w.leader   ? ipc::CacheOutcome::kJoin
                   : cacheable ? ipc::CacheOutcome::kMiss
                               : ipc::CacheOutcome::kPassthrough;
    if (run.success && cacheable) {
      bool same_view =
          w.view == flight.view || (w.view && flight.view && w.view->id() == flight.view->id());
      Result<void> delivered = make_error(ErrorCode::kInternal, "not delivered");
      {
        InView in_view(w.view.get());  // delivered in the waiter's own view
        delivered = in_view.error().empty()
                        ? deliver(m_deps.planner, w.plan, w.umask, run.entry, w.client_pid,
                                  same_view ? &flight.plan : nullptr)
                        : make_error(ErrorCode::kPermission, in_view.error());
      }
      if (!delivered) {
        ++m_deps.counters.service_errors;
        send(w, failed_reply("ccpool could not write the outputs: " + delivered.error().message));
        continue;
      }
    }
    send(w, completed(run.entry, outcome));
  }
}

// Manifests are read through the storage layer (node store, then the tier;
// `local_only`: the node store alone). Writes go through store(), after the
// result they name.
compiler::ManifestStorage ExecPipeline::manifests(bool local_only) {
  compiler::ManifestStorage storage;
  storage.load = [this, local_only](const Digest& key) -> std::optional<std::string> {
    std::optional<Found> found = local_only
                                     ? m_deps.storage.get_local(key, Bodies::kWith, Touch::kPeek)
                                     : m_deps.storage.get(key, Bodies::kWith, Touch::kPeek);
    if (!found || found->entry.kind != cache::EntryKind::kBlob || found->entry.outputs.empty()) {
      return std::nullopt;
    }
    return std::move(found->entry.outputs.front().data);
  };
  storage.content = [this, local_only](const Digest& key) -> std::optional<Digest> {
    std::optional<Found> found = local_only
                                     ? m_deps.storage.get_local(key, Bodies::kWithout, Touch::kPeek)
                                     : m_deps.storage.get(key, Bodies::kWithout, Touch::kPeek);
    if (!found || found->entry.kind != cache::EntryKind::kBlob || found->entry.outputs.empty()) {
      return std::nullopt;
    }
    return found->entry.outputs.front().checksum;
  };
  return storage;
}

void ExecPipeline::on_disconnect(uint64_t conn_id) {
  for (auto& flight : m_flights.remove_connection(conn_id)) {
    if (m_deps.scheduler.cancel_queued(flight->job)) {
      ++m_deps.counters.cancelled;
      m_flights.complete(flight);
      retire(*flight);
    } else if (flight->pid > 0) {
      m_deps.runner.cancel(flight->pid);  // the exit callback finishes the flight
    }
    // Otherwise the job is being started right now: start() sees `cancelled`.
  }
}

size_t ExecPipeline::learn_lessons_while_idle() {
  // The node store only: a lesson never waits on the tier.
  return m_deps.planner.learn_lessons(
      manifests(true), [this] { return !m_stopping && m_flights.size() == 0 && pending() == 0; });
}

void ExecPipeline::stop_all() {
  m_stopping = true;
  m_deps.scheduler.drain_queued([](pool::JobId) {});
  for (auto& flight : m_flights.all()) {
    for (auto& w : m_flights.complete(flight)) {
      ++m_deps.counters.stopping_replies;
      ipc::ExecReply reply;
      reply.status = ipc::ExecStatus::kStopping;
      reply.message = "the ccpool service is stopping; run the tool locally";
      m_deps.reply(w.conn_id, std::move(reply));
    }
  }
}

nlohmann::json ExecPipeline::running_jobs() {
  nlohmann::json jobs = nlohmann::json::array();
  for (const auto& proc : m_deps.runner.running()) {
    jobs.push_back({{"pid", proc.pid},
                    {"tool", proc.program.substr(proc.program.rfind('/') + 1)},
                    {"argv", summarize_argv(proc.argv)},
                    {"client_pid", m_flights.leader_client_pid(proc.tag)},
                    {"elapsed_ms", proc.elapsed.count()},
                    {"rss", proc.rss_kb * 1024}});
  }
  return jobs;
}

}  // namespace ccpool::service
