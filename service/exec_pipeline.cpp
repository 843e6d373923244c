#include "service/exec_pipeline.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "base/fault.h"
#include "base/fs.h"
#include "service/delivery.h"

namespace ccpool::service {
namespace {

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

// True when `path` is a regular file holding exactly `bytes`. Replacing such a
// file by rename costs milliseconds on ext4 (its replace-via-rename heuristic
// starts writeback of the new file) for no visible change.
bool holds_bytes(const std::string& path, std::string_view bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<uint64_t>(st.st_size) != bytes.size()) {
    return false;
  }
  auto existing = read_file(path);
  return existing && *existing == bytes;
}

// Gives an up-to-date file the mode and mtime a fresh write would have: build
// tools compare mtimes, so an output must look newer than its inputs.
Result<void> refresh(const std::string& path, uint32_t mode) {
  if (::chmod(path.c_str(), mode) != 0 || ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0) != 0) {
    return make_error(ErrorCode::kIo, "cannot update '" + path + "': " + std::strerror(errno));
  }
  return ok();
}

// Writes every output of `entry` that `plan` asks for at the plan's deliver
// paths. Where the leader's tool already wrote the file in place, only its
// mode is fixed.
Result<void> deliver(const compiler::Planner& planner, const compiler::Plan& plan,
                     uint32_t umask, const cache::Entry& entry,
                     const compiler::Plan* leader = nullptr) {
  for (const auto& spec : plan.outputs) {
    const cache::Output* out = find_output(entry, spec.name);
    if (out == nullptr) {
      if (spec.optional) continue;
      return make_error(ErrorCode::kCorruption, "stored result lacks output '" + spec.name + "'");
    }
    std::string bytes = planner.deliver_bytes(plan, spec, out->data);
    uint32_t mode = delivered_mode(out->mode, umask);
    if (bytes == out->data && written_in_place(leader, spec.name, spec.deliver_path)) {
      if (::chmod(spec.deliver_path.c_str(), mode) != 0) {
        return make_error(ErrorCode::kIo, "cannot chmod '" + spec.deliver_path + "'");
      }
      continue;
    }
    if (holds_bytes(spec.deliver_path, bytes)) {
      CCPOOL_TRY(refresh(spec.deliver_path, mode));
      continue;
    }
    CCPOOL_TRY(write_file_atomic(spec.deliver_path, bytes, mode));
  }
  return ok();
}

// Per-reason counts: the service's own (status) and the store's (persistent,
// `ccpool cache stats`).
void count_reason(ExecPipeline::Deps& deps, std::string_view kind, const std::string& code) {
  const std::string& c = code.empty() ? std::string("unknown") : code;
  (kind == "passthrough" ? deps.counters.passthrough_reasons : deps.counters.not_stored_reasons).add(c);
  deps.store.count_event(std::string(kind) + ":" + c);
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
  int64_t delay = FaultInjector::instance().reply_delay_ms();
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
                          UniqueFd stdin_fd) {
  ++m_deps.counters.requests;
  if (m_stopping) {
    ++m_deps.counters.stopping_replies;
    ipc::ExecReply reply;
    reply.status = ipc::ExecStatus::kStopping;
    reply.message = "the ccpool service is stopping";
    m_deps.reply(conn_id, std::move(reply));
    return;
  }
  ++m_pending;
  auto received = std::chrono::steady_clock::now();
  auto shared_stdin = std::make_shared<UniqueFd>(std::move(stdin_fd));
  m_deps.scheduler.run_in_arena([this, conn_id, peer_pid, received, shared_stdin,
                                 request = std::move(request)]() mutable {
    handle(conn_id, peer_pid, std::move(request), std::move(shared_stdin), received);
    --m_pending;
  });
}

void ExecPipeline::handle(uint64_t conn_id, pid_t peer_pid, ipc::ExecRequest request,
                          std::shared_ptr<UniqueFd> stdin_fd,
                          std::chrono::steady_clock::time_point received) {
  compiler::Request creq;
  creq.program = std::move(request.program);
  creq.argv = std::move(request.argv);
  creq.cwd = std::move(request.cwd);
  creq.env = std::move(request.env);  // the planner removes the shim from run_env
  creq.declared_inputs = std::move(request.inputs);
  creq.declared_outputs = std::move(request.outputs);

  std::string work_dir = m_deps.work_root + "/j" + std::to_string(++m_work_seq);
  auto plan = m_deps.planner.plan(creq, work_dir);
  if (!plan) {
    ++m_deps.counters.service_errors;
    spdlog::warn("cannot plan '{}': {}", creq.program, plan.error().message);
    m_deps.reply(conn_id, failed_reply("ccpool could not plan this command: " + plan.error().message));
    return;
  }

  Waiter waiter{conn_id, peer_pid, request.umask, *plan};
  bool cacheable = plan->kind != compiler::PlanKind::kPassthrough;
  if (!cacheable) {
    ++m_deps.counters.passthrough;
    count_reason(m_deps, "passthrough", plan->reason_code);
    spdlog::debug("pass-through {} {}: {}", plan->reason_code, plan->tool, plan->reason);
  } else if (serve_from_store(*plan, waiter, true)) {
    m_deps.counters.hit_time_ns += static_cast<uint64_t>(
        (std::chrono::steady_clock::now() - received).count());
    return;
  }

  uint64_t fairness = fairness_id(request.rank, peer_pid);  // reads /proc: only for misses
  auto joined = m_flights.join_or_lead(plan->flight_key, cacheable, std::move(waiter), *plan, fairness);
  if (!joined.leader) {
    ++m_deps.counters.joins;
    return;
  }
  if (cacheable) ++m_deps.counters.misses;
  joined.flight->program = creq.program;
  joined.flight->work_dir = work_dir;
  joined.flight->waiters_argv = creq.argv;
  if (!cacheable) joined.flight->stdin_fd = std::move(stdin_fd);
  lead(joined.flight);
}

bool ExecPipeline::serve_from_store(const compiler::Plan& plan, const Waiter& waiter,
                                    bool remote_allowed) {
  auto key = m_deps.planner.lookup(plan, manifests());
  if (!key) {
    spdlog::warn("manifest lookup failed: {}", key.error().message);
    return false;
  }
  if (!*key) return false;
  auto entry = m_deps.store.get(**key);
  bool remote = false;
  if (entry && !*entry && remote_allowed && m_deps.tier != nullptr) {
    if (auto packed = m_deps.tier->get(**key)) {
      if (m_deps.store.put_packed(**key, *packed)) {
        entry = m_deps.store.get(**key);
        remote = true;
      }
    }
  }
  if (!entry || !*entry) return false;
  if ((*entry)->kind != cache::EntryKind::kCompile) return false;
  auto delivered = deliver(m_deps.planner, waiter.plan, waiter.umask, **entry);
  if (!delivered) {
    ++m_deps.counters.service_errors;
    spdlog::warn("cannot deliver a hit: {}", delivered.error().message);
    send(waiter, failed_reply("ccpool could not write the outputs: " + delivered.error().message));
    return true;
  }
  ++(remote ? m_deps.counters.remote_hits : m_deps.counters.hits);
  send(waiter, completed(**entry, remote ? ipc::CacheOutcome::kRemoteHit : ipc::CacheOutcome::kHit));
  return true;
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
  while (state == remote::LeaseState::kHeldByOther && !m_stopping &&
         !m_flights.is_cancelled(flight)) {
    // The holder writes the result (and, in direct mode, the manifest under
    // the flight key) before it releases the lease.
    auto value = m_deps.tier->wait_for_result(flight->key, std::chrono::milliseconds(500));
    if (value) {
      if (m_deps.store.put_packed(flight->key, *value) && complete_from_store(flight)) return;
      break;  // not usable here (e.g. the manifest does not validate): compile locally
    }
    // No value yet: the wait slice ended, or the holder died and its lease expired.
    state = m_deps.tier->acquire_lease(flight->key);
  }
  if (m_stopping || m_flights.is_cancelled(flight)) {
    if (state == remote::LeaseState::kAcquired) m_deps.tier->release_lease(flight->key);
    m_flights.complete(flight);  // waiters, if any, were answered by stop_all()
    return;
  }
  if (state != remote::LeaseState::kAcquired) {
    state = m_deps.tier->acquire_lease(flight->key);
  }
  flight->lease_held = state == remote::LeaseState::kAcquired;
  schedule(flight);
}

bool ExecPipeline::complete_from_store(const std::shared_ptr<Flight>& flight) {
  auto key = m_deps.planner.lookup(flight->plan, manifests());
  if (!key || !*key) return false;
  auto entry = m_deps.store.get(**key);
  if (entry && !*entry && m_deps.tier != nullptr) {
    if (auto packed = m_deps.tier->get(**key); packed && m_deps.store.put_packed(**key, *packed)) {
      entry = m_deps.store.get(**key);
    }
  }
  if (!entry || !*entry || (*entry)->kind != cache::EntryKind::kCompile) return false;
  for (auto& w : m_flights.complete(flight)) {
    auto delivered = deliver(m_deps.planner, w.plan, w.umask, **entry);
    if (!delivered) {
      ++m_deps.counters.service_errors;
      send(w, failed_reply("ccpool could not write the outputs: " + delivered.error().message));
      continue;
    }
    ++m_deps.counters.remote_hits;
    send(w, completed(**entry, ipc::CacheOutcome::kRemoteHit));
  }
  return true;
}

void ExecPipeline::schedule(const std::shared_ptr<Flight>& flight) {
  pool::JobId job = m_deps.scheduler.submit(
      flight->fairness_id, flight->plan.job_class,
      [this, flight](pool::JobId id) { start(flight, id); });
  // start() may already have run; recording the same id again is harmless. If
  // every waiter left before the id was known, drop the queued job here.
  if (!m_flights.set_job(flight, job) && m_deps.scheduler.cancel_queued(job)) {
    ++m_deps.counters.cancelled;
    m_flights.complete(flight);
    if (flight->lease_held) m_deps.tier->release_lease(flight->key);
  }
}

void ExecPipeline::start(const std::shared_ptr<Flight>& flight, pool::JobId job) {
  if (!m_flights.set_job(flight, job)) {
    m_deps.scheduler.finish(job, 0);
    pool::ProcessResult cancelled;
    cancelled.cancelled = true;
    finish_flight(flight, std::move(cancelled));
    return;
  }
  const compiler::Plan& plan = flight->plan;
  if (plan.uses_work_dir && ::mkdir(flight->work_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    m_deps.scheduler.finish(job, 0);
    fail_flight(flight, "ccpool cannot create its work dir '" + flight->work_dir + "'");
    return;
  }
  pool::SpawnSpec spec;
  spec.program = plan.run_program.empty() ? flight->program : plan.run_program;
  spec.argv = plan.run_argv;
  spec.env = plan.run_env;
  spec.cwd = plan.run_cwd;
  spec.timeout = m_deps.job_timeout;
  if (flight->stdin_fd && *flight->stdin_fd) spec.stdin_fd = flight->stdin_fd->get();
  flight->started = std::chrono::system_clock::now();
  auto pid = m_deps.runner.spawn(spec, flight->id, [this, flight, job](pool::ProcessResult result) {
    m_deps.scheduler.finish(job, result.max_rss_kb);
    m_deps.scheduler.run_in_arena([this, flight, result = std::move(result)]() mutable {
      finish_flight(flight, std::move(result));
    });
  });
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
  if (flight->lease_held) m_deps.tier->release_lease(flight->key);
}

void ExecPipeline::finish_flight(const std::shared_ptr<Flight>& flight, pool::ProcessResult result) {
  const compiler::Plan& plan = flight->plan;
  auto cleanup = [&] {
    if (plan.uses_work_dir && !flight->work_dir.empty()) remove_tree(flight->work_dir);
    if (flight->lease_held) m_deps.tier->release_lease(flight->key);
  };
  if (result.cancelled) {
    ++m_deps.counters.cancelled;
    spdlog::info("cancelled {} (every waiter left)", plan.tool);
    auto waiters = m_flights.complete(flight);  // empty unless stopping, which already replied
    cleanup();
    return;
  }
  bool success = result.exit_code == 0 && !result.timed_out && !result.output_overflow;
  if (!success) {
    ++m_deps.counters.failures;
    if (!result.error.empty()) {
      result.stderr_data += "ccpool: " + result.error + "\n";
    }
  }

  cache::Entry entry;
  entry.kind = cache::EntryKind::kCompile;
  entry.exit_code = result.exit_code;
  entry.stdout_data = std::move(result.stdout_data);
  entry.stderr_data = std::move(result.stderr_data);
  entry.time_saved_ms = static_cast<uint64_t>(result.elapsed.count());
  entry.tool = plan.tool;
  entry.argv = flight->waiters_argv;
  entry.cwd = plan.run_cwd;
  entry.inputs = plan.inputs;

  bool cacheable = plan.kind != compiler::PlanKind::kPassthrough;
  if (success && cacheable) {
    bool complete = true;
    for (const auto& spec : plan.outputs) {
      auto data = read_file(spec.run_path);
      if (!data) {
        if (!spec.optional) complete = false;
        continue;
      }
      struct stat st{};
      ::stat(spec.run_path.c_str(), &st);
      entry.outputs.push_back(cache::Output{spec.name, static_cast<uint32_t>(st.st_mode & 0777), 0, {},
                                            std::move(*data)});
    }
    compiler::Finished missing;
    missing.why_not = "an output is missing";
    missing.why_not_code = "output_missing";
    auto finished = complete ? m_deps.planner.finish(plan, flight->started, manifests())
                             : Result<compiler::Finished>(std::move(missing));
    if (finished && finished->store && finished->mode == compiler::KeyMode::kPreprocessor) {
      entry.label = "preprocessor mode";  // which rule made the key (`ccpool cache ls/show`)
    }
    if (!finished) {
      spdlog::warn("not stored internal_error {}: {}", plan.tool, finished.error().message);
      ++m_deps.counters.not_stored;
      count_reason(m_deps, "not_stored", "internal_error");
    } else if (!finished->store) {
      spdlog::info("not stored {} {}: {}", finished->why_not_code, plan.tool, finished->why_not);
      ++m_deps.counters.not_stored;
      count_reason(m_deps, "not_stored", finished->why_not_code);
    } else if (FaultInjector::instance().should_fail_store_write()) {
      spdlog::warn("fault injection: failing a store write");
      ++m_deps.counters.store_errors;
    } else if (auto put = m_deps.store.put(finished->result_key, entry); !put) {
      spdlog::warn("cannot store a result (carrying on without caching): {}", put.error().message);
      ++m_deps.counters.store_errors;
    } else if (m_deps.tier != nullptr) {
      if (auto packed = m_deps.store.get_packed(finished->result_key); packed && *packed) {
        m_deps.tier->put_async(finished->result_key, std::move(**packed));
      }
    }
  }

  auto waiters = m_flights.complete(flight);
  bool leader = true;
  for (auto& w : waiters) {
    ipc::ExecReply reply = completed(entry, leader ? (cacheable ? ipc::CacheOutcome::kMiss
                                                                : ipc::CacheOutcome::kPassthrough)
                                                   : ipc::CacheOutcome::kJoin);
    leader = false;
    if (success && cacheable) {
      auto delivered = deliver(m_deps.planner, w.plan, w.umask, entry, &plan);
      if (!delivered) {
        ++m_deps.counters.service_errors;
        send(w, failed_reply("ccpool could not write the outputs: " + delivered.error().message));
        continue;
      }
    }
    send(w, std::move(reply));
  }
  cleanup();
}

compiler::ManifestStorage ExecPipeline::manifests() {
  compiler::ManifestStorage storage;
  storage.load = [this](const Digest& key) -> std::optional<std::string> {
    auto entry = m_deps.store.peek(key, true);
    if (entry && !*entry && m_deps.tier != nullptr) {
      if (auto packed = m_deps.tier->get(key); packed && m_deps.store.put_packed(key, *packed)) {
        entry = m_deps.store.peek(key, true);
      }
    }
    if (!entry || !*entry || (*entry)->kind != cache::EntryKind::kBlob || (*entry)->outputs.empty()) {
      return std::nullopt;
    }
    return std::move((*entry)->outputs.front().data);
  };
  storage.save = [this](const Digest& key, const std::string& bytes) {
    cache::Entry blob;
    blob.kind = cache::EntryKind::kBlob;
    blob.label = "manifest";
    blob.outputs.push_back(cache::Output{"manifest", 0644, 0, {}, bytes});
    if (auto put = m_deps.store.put(key, blob); !put) {
      spdlog::warn("cannot store a manifest: {}", put.error().message);
      return;
    }
    if (m_deps.tier != nullptr) {
      if (auto packed = m_deps.store.get_packed(key); packed && *packed) {
        m_deps.tier->put_async(key, std::move(**packed));
      }
    }
  };
  return storage;
}

void ExecPipeline::on_disconnect(uint64_t conn_id) {
  for (auto& flight : m_flights.remove_connection(conn_id)) {
    if (m_deps.scheduler.cancel_queued(flight->job)) {
      ++m_deps.counters.cancelled;
      m_flights.complete(flight);
      if (flight->lease_held) m_deps.tier->release_lease(flight->key);
    } else if (flight->pid > 0) {
      m_deps.runner.cancel(flight->pid);  // the exit callback finishes the flight
    }
    // Otherwise the job is being started right now: start() sees `cancelled`.
  }
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
