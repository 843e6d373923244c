#include "service/service.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <ctime>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/fault.h"
#include "base/fs.h"
#include "base/paths.h"
#include "base/thread_annotations.h"
#include "cache/record.h"
#include "cache/store.h"
#include "compiler/planner.h"
#include "pool/process_runner.h"
#include "pool/scheduler.h"
#include "resp/front.h"
#include "service/connection_hub.h"
#include "service/exec_pipeline.h"
#include "service/metrics.h"
#include "service/metrics_server.h"
#include "service/status.h"
#include "service/store_kv.h"
#include "service/worker_sessions.h"
#include "workers/worker_pool.h"

namespace ccpool::service {
namespace {

constexpr auto kStoreFlushInterval = std::chrono::seconds(5);
constexpr auto kKillGrace = std::chrono::milliseconds(2000);

// The service deletes its work directory at start and stop, so it must be
// one the service created: a directory of its own holding this mark. The
// state directory may be any directory of the user's (--socket ~/x.sock).
constexpr const char* kWorkDirName = "/ccpool-work";
constexpr const char* kWorkMark = "/.ccpool-work";

bool is_marked_work_dir(const std::string& root) {
  struct stat dir, mark;
  return ::lstat(root.c_str(), &dir) == 0 && S_ISDIR(dir.st_mode) && dir.st_uid == ::geteuid() &&
         ::lstat((root + kWorkMark).c_str(), &mark) == 0 && S_ISREG(mark.st_mode) &&
         mark.st_uid == ::geteuid();
}

// Removes what a crashed instance left, then creates the directory and its mark.
Result<std::string> prepare_work_root(const std::string& state_dir) {
  std::string root = state_dir + kWorkDirName;
  if (is_marked_work_dir(root)) {
    remove_tree(root);
  } else if (path_exists(root)) {
    return make_error(
        ErrorCode::kInvalidArgument,
        "'" + root + "' exists but was not created by ccpool (it has no " + (kWorkMark + 1) +
            " mark); the service empties its work directory at start and stop, so it will not "
            "use this one: move it away or choose another --socket directory");
  }
  CCPOOL_TRY(ensure_private_dir(root));
  CCPOOL_TRY(write_file_atomic(
      root + kWorkMark, "ccpool serve's work directory: emptied at every start and stop\n", 0600));
  return root;
}

uint64_t count_lines(const std::string& path) {
  auto data = read_file(path);
  if (!data) return 0;
  uint64_t n = 0;
  for (char c : *data) n += c == '\n';
  return n;
}

StoreFigures store_figures(const cache::StoreStats& s) {
  return {s.entries,   s.stored_bytes,      s.logical_bytes, s.max_size,
          s.evictions, s.corrupt_evictions, s.time_saved_ms};
}

}  // namespace

// Members are declared in dependency order; shutdown() tears them down in the
// order the data flow needs (stop intake, kill children, drain the arena,
// then close the store), not in reverse declaration order.
struct Service::Impl {
  ServiceOptions options;
  std::string state_dir;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  int64_t start_time_s = static_cast<int64_t>(std::time(nullptr));
  std::atomic<bool> stop{false};
  Counters counters;

  std::unique_ptr<cache::Store> store;
  std::unique_ptr<remote::Tier> tier;
  std::unique_ptr<Storage> storage;
  std::unique_ptr<compiler::Planner> planner;
  std::unique_ptr<pool::Scheduler> scheduler;
  std::unique_ptr<pool::ProcessRunner> runner;
  std::unique_ptr<ConnectionHub> hub;
  std::unique_ptr<ExecPipeline> pipeline;
  std::unique_ptr<workers::WorkerPool> worker_pool;  // Inductor's compile workers of every rank
  std::unique_ptr<WorkerSessions> worker_sessions;
  std::unique_ptr<StoreKv> kv;
  std::unique_ptr<resp::Front> front;
  std::unique_ptr<MetricsServer> metrics;  // its thread calls status_figures()

  // Store figures for status and metrics, refreshed with the periodic flush
  // in the arena: a full stats() scan never runs on the I/O thread.
  Mutex store_stats_mutex;
  std::optional<StoreFigures> store_stats GUARDED_BY(store_stats_mutex);

  std::chrono::steady_clock::time_point last_flush = std::chrono::steady_clock::now();
  uint64_t last_front_commands = 0;
  std::atomic<bool> learning_lessons{false};  // one drain of the planner's lessons at a time
  std::chrono::steady_clock::time_point last_front_activity = std::chrono::steady_clock::now();

  void on_message(uint64_t conn_id, const ipc::PeerCred& peer, ipc::Message message,
                  UniqueFd passed_fd);
  // One reading of the components' figures: status() shows more of them
  // than the struct holds, from the same reading.
  struct Readings {
    Histogram::Snapshot hit_times;
    remote::RemoteCounters remote{};
    workers::WorkerPoolStats workers;
    resp::FrontCounters front{};
    resp::LeaseStats leases{};
  };
  Readings read_components();
  ServiceStatus status_figures(const Readings& r);  // what /metrics renders
  nlohmann::json status();
  void refresh_store_stats();
  void tick();
  void shutdown();
};

Result<std::unique_ptr<Service>> Service::create(const ServiceOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->state_dir = state_dir_for_socket(options.socket_path);
  CCPOOL_TRY(ensure_private_dir(impl->state_dir));

  cache::StoreOptions store_options;
  store_options.dir = default_store_dir(options.store_dir);
  if (options.max_size > 0) store_options.max_size = options.max_size;
  store_options.faults = options.faults;
  CCPOOL_TRY_ASSIGN(impl->store, cache::Store::open(store_options));

  if (options.remote) {
    remote::RemoteOptions remote_options = *options.remote;
    // Structure and framing are checked here; put_packed re-checks every body
    // checksum before anything from Redis is stored or served.
    remote_options.validate = [](std::string_view value) {
      return cache::unpack_entry(value).has_value();
    };
    CCPOOL_TRY_ASSIGN(impl->tier, remote::Tier::create(remote_options));
    spdlog::info("cluster tier: {}", remote_options.url);
    if (remote_options.hmac_key_file.empty()) {
      spdlog::warn(
          "UNSIGNED CLUSTER TIER (--remote-unsigned): entries from {} are not authenticated; "
          "anyone "
          "who can write to it can serve any object to this node. Use --remote-key-file.",
          remote_options.url);
    }
  }
  impl->storage = std::make_unique<Storage>(*impl->store, impl->tier.get());
  compiler::PlannerOptions planner_options;
  planner_options.validation_memo = options.validation_memo;
  planner_options.validation_memo_drops_events = options.faults->drops_fs_events();
  planner_options.defer_lessons = true;  // learned in tick() once idle
  impl->planner = std::make_unique<compiler::Planner>(std::move(planner_options));
  pool::SchedulerOptions sched;
  sched.jobs = options.jobs;
  sched.mem_budget = options.mem_budget;
  impl->scheduler = std::make_unique<pool::Scheduler>(sched);
  impl->runner = std::make_unique<pool::ProcessRunner>(*options.faults);

  CCPOOL_TRY_ASSIGN(std::string work_root, prepare_work_root(impl->state_dir));

  Impl* raw = impl.get();
  ConnectionHub::Callbacks callbacks;
  callbacks.on_message = [raw](uint64_t conn, const ipc::PeerCred& peer, ipc::Message message,
                               UniqueFd passed_fd) {
    raw->on_message(conn, peer, std::move(message), std::move(passed_fd));
  };
  callbacks.on_disconnect = [raw](uint64_t conn) {
    if (raw->pipeline) raw->pipeline->on_disconnect(conn);
    if (raw->worker_sessions) raw->worker_sessions->on_disconnect(conn);
  };
  CCPOOL_TRY_ASSIGN(impl->hub, ConnectionHub::create(options.socket_path, std::move(callbacks),
                                                     UniqueFd(options.listen_fd)));

  ExecPipeline::Deps deps{*impl->storage,
                          *impl->scheduler,
                          *impl->runner,
                          *impl->planner,
                          impl->tier.get(),
                          impl->counters,
                          [raw](uint64_t conn, ipc::ExecReply reply) {
                            raw->hub->send(conn, ipc::Message(std::move(reply)));
                          },
                          work_root,
                          options.job_timeout,
                          *options.faults,
                          options.hits_on_io_thread};
  impl->pipeline = std::make_unique<ExecPipeline>(std::move(deps));

  workers::WorkerPoolOptions pool_options;
  pool_options.max_workers = impl->scheduler->stats().jobs;
  pool_options.idle_timeout = options.worker_idle_timeout;
  pool_options.job_timeout = options.job_timeout;
  // -c, not -m: -m would put the rank's cwd first on the worker's sys.path.
  pool_options.worker_argv = {
      "-c",
      "import sys; del sys.path[0]; from ccpool._worker import main; sys.exit(main(sys.argv[1:]))"};
  pool_options.zygotes =
      true;  // workers are forks of a set-up zygote, as Inductor's are of its sidecar
  impl->worker_pool = std::make_unique<workers::WorkerPool>(pool_options, *impl->scheduler);
  WorkerSessions::Options session_options;
  session_options.python_dir = options.python_dir;
  session_options.worker_env = {"CCPOOL_WORKER=1"};
  if (options.resp_enabled)
    session_options.worker_env.push_back("CCPOOL_RESP_SOCKET=" + impl->state_dir + "/resp.sock");
  impl->worker_sessions = std::make_unique<WorkerSessions>(
      *impl->worker_pool, std::move(session_options),
      [raw](uint64_t conn, ipc::Message message, bool close_after) {
        raw->hub->send(conn, message, close_after);
      });

  if (options.resp_enabled) {
    impl->kv = std::make_unique<StoreKv>(*impl->storage);
    resp::FrontOptions front_options;
    front_options.unix_path = impl->state_dir + "/resp.sock";
    front_options.tcp_port = options.resp_port;
    // One loop is fastest on a few cores (no wakeups split between loops), but
    // a tier lookup blocks its loop for up to the tier's timeout: with a tier,
    // more loops keep one slow lookup from stalling every connection.
    front_options.io_threads =
        options.resp_threads > 0 ? options.resp_threads : (impl->tier ? 4 : 1);
    front_options.password = options.resp_password;
    auto front = resp::Front::start(front_options, *impl->kv);
    if (!front) {
      return make_error(front.error().code,
                        "cannot start the Redis-protocol front: " + front.error().message);
    }
    impl->front = std::move(*front);
  }

  impl->refresh_store_stats();
  if (options.metrics_port >= 0) {
    auto metrics = MetricsServer::start(options.metrics_port, [raw](MetricsFormat format) {
      return render_metrics(raw->status_figures(raw->read_components()), format);
    });
    if (!metrics) return make_error(metrics.error().code, metrics.error().message);
    impl->metrics = std::move(*metrics);
    spdlog::info("metrics on http://127.0.0.1:{}/metrics", impl->metrics->port());
  }

  auto stats = impl->scheduler->stats();
  spdlog::info("serving on {} (pid {}): jobs {}, memory budget {} MiB, store {}",
               options.socket_path, ::getpid(), stats.jobs, stats.mem_budget >> 20,
               store_options.dir);
  if (options.faults->enabled()) {
    spdlog::warn("FAULT INJECTION IS ON (CCPOOL_FAULT={}): for tests only", options.faults->spec());
  }
  return std::unique_ptr<Service>(new Service(std::move(impl)));
}

Service::Service(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}

Service::~Service() {
  m_impl->shutdown();
}

void Service::request_stop() {
  m_impl->stop = true;
  if (m_impl->hub) m_impl->hub->wake();
}

int Service::run() {
  Impl& impl = *m_impl;
  impl.hub->run([&] { return impl.stop.load(); }, [&] { impl.tick(); });
  spdlog::info("stopping");
  impl.shutdown();
  spdlog::info("stopped");
  return 0;
}

void Service::Impl::on_message(uint64_t conn_id, const ipc::PeerCred& peer, ipc::Message message,
                               UniqueFd passed_fd) {
  if (auto* exec = std::get_if<ipc::ExecRequest>(&message)) {
    pipeline->submit(conn_id, peer.pid, std::move(*exec), std::move(passed_fd), hub->quiet());
  } else if (auto* open = std::get_if<ipc::PoolOpen>(&message)) {
    worker_sessions->on_open(conn_id, peer.pid, std::move(*open));
  } else if (auto* submit = std::get_if<ipc::PoolSubmit>(&message)) {
    worker_sessions->on_submit(conn_id, std::move(*submit));
  } else if (auto* cancel = std::get_if<ipc::PoolCancel>(&message)) {
    worker_sessions->on_cancel(conn_id, *cancel);
  } else if (std::holds_alternative<ipc::Ping>(message)) {
    hub->send(conn_id, ipc::Pong{});
  } else if (std::holds_alternative<ipc::StatusRequest>(message)) {
    hub->send(conn_id, ipc::StatusReply{status().dump()});
  } else if (std::holds_alternative<ipc::StopRequest>(message)) {
    spdlog::info("stop requested by pid {}", peer.pid);
    hub->send(conn_id, ipc::StopReply{});
    stop = true;
  } else {
    hub->note_protocol_error();
    hub->send(conn_id,
              ipc::ErrorFrame{static_cast<uint16_t>(ErrorCode::kProtocol),
                              "unexpected message from a client"},
              true);
  }
}

Service::Impl::Readings Service::Impl::read_components() {
  Readings r;
  r.hit_times = counters.hit_latency.snapshot();
  if (tier) r.remote = tier->counters();
  r.workers = worker_pool->stats();
  if (front) {
    r.front = front->counters();
    r.leases = front->lease_stats();  // CCPOOL.LEASE: graph compiles, Triton kernels
  }
  return r;
}

ServiceStatus Service::Impl::status_figures(const Readings& r) {
  ServiceStatus s;
  s.version = kVersion;
  s.start_time_s = static_cast<uint64_t>(start_time_s);
  s.requests = counters.requests.load();
  s.hits = counters.hits.load();
  s.exec_remote_hits = counters.remote_hits.load();
  s.misses = counters.misses.load();
  s.joins = counters.joins.load();
  s.passthrough = counters.passthrough.load();
  s.not_stored = counters.not_stored.load();
  s.passthrough_reasons = counters.passthrough_reasons.snapshot();
  s.not_stored_reasons = counters.not_stored_reasons.snapshot();
  s.service_errors = counters.service_errors.load();
  s.fallbacks = count_lines(state_dir + "/fallbacks.log");
  s.hit_latency = histogram_figures(r.hit_times);
  for (size_t i = 0; i < kHitStageNames.size(); ++i) {
    s.hit_stage_seconds[kHitStageNames[i]] =
        static_cast<double>(counters.hit_stage_ns[i].load(std::memory_order_relaxed)) / 1e9;
  }
  auto sched = scheduler->stats();
  s.executions = counters.executions.load();
  s.failures = counters.failures.load();
  s.cancelled = counters.cancelled.load();
  s.queued = sched.queued;
  s.running = sched.running;
  s.peak_running = sched.peak_running;
  s.jobs = static_cast<uint64_t>(sched.jobs);
  s.mem_budget = sched.mem_budget;
  s.mem_reserved = sched.reserved_bytes;
  s.clients = hub->connection_count();
  s.refused_peers = hub->counters().refused_peers.load();
  s.protocol_errors = hub->counters().protocol_errors.load();
  s.store_errors = counters.store_errors.load();
  {
    MutexLock lock(&store_stats_mutex);
    s.store = store_stats;
  }
  const remote::RemoteCounters& rc = r.remote;
  s.cluster = {tier != nullptr,  counters.remote_hits.load() + (kv ? kv->remote_hits() : 0),
               rc.misses,        rc.errors,
               rc.writes,        rc.invalid,
               rc.bad_signature, rc.breaker_open,
               rc.breaker_opened};
  s.tier_latency["node"] = histogram_figures(storage->local_latency());
  if (tier) s.tier_latency["cluster"] = histogram_figures(storage->tier_latency());
  const workers::WorkerPoolStats& ws = r.workers;
  s.worker_pool = WorkerPoolFigures{worker_sessions->sessions(),
                                    ws.workers,
                                    ws.busy,
                                    static_cast<uint64_t>(ws.rss_kb * 1024),
                                    ws.spawned,
                                    ws.jobs_done,
                                    ws.followed,
                                    ws.jobs_failed,
                                    ws.cancelled,
                                    ws.counts};
  if (front) {
    s.front = FrontFigures{r.front.commands, r.front.connections, r.front.refused_peers};
    const resp::LeaseStats& ls = r.leases;
    s.leases = LeaseFigures{ls.keys_in_flight, ls.waiting, ls.served, ls.abandoned, ls.timed_out};
  }
  return s;
}

// The figures, then what only `ccpool status` shows.
nlohmann::json Service::Impl::status() {
  Readings r = read_components();
  ServiceStatus figures = status_figures(r);
  nlohmann::json j = nlohmann::json::object();
  write_status_json(j, figures);
  j["pid"] = ::getpid();
  j["socket"] = options.socket_path;
  j["store_dir"] = store->dir();
  j["uptime_s"] =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started)
          .count();
  uint64_t timed_hits = r.hit_times.count();
  j["hit_service_us"] =
      timed_hits ? static_cast<double>(r.hit_times.sum_ns) / timed_hits / 1000.0 : 0.0;
  nlohmann::json stages = nlohmann::json::object();  // the mean per hit of each stage
  for (size_t i = 0; i < kHitStageNames.size(); ++i) {
    stages[kHitStageNames[i]] =
        timed_hits ? static_cast<double>(counters.hit_stage_ns[i].load()) / timed_hits / 1000.0
                   : 0.0;
  }
  j["hit_stages_us"] = stages;
  // Of `hits`: served on the I/O thread, with no hand-off (ExecPipeline::submit).
  j["hits_on_io_thread"] = counters.hits_on_io_thread.load();
  // Finished runs held by CCPOOL_FAULT=delay_finish: their tool has exited (for tests).
  j["fault_holds"] = counters.fault_holds.load();
  // send(2) calls that wrote to clients (ConnectionHub: hello-ok and a hit's reply share one).
  j["connection_writes"] = hub->counters().writes.load();
  uint64_t timed_misses = counters.timed_misses.load();
  nlohmann::json miss_stages = nlohmann::json::object();  // the mean per stored miss
  for (size_t i = 0; i < kMissStageNames.size(); ++i) {
    miss_stages[kMissStageNames[i]] =
        timed_misses ? static_cast<double>(counters.miss_stage_ns[i].load()) / timed_misses / 1000.0
                     : 0.0;
  }
  j["timed_misses"] = timed_misses;
  j["miss_stages_us"] = miss_stages;
  j["join_reruns"] = counters.join_reruns.load();
  cache::GroupCommitStats commits = storage->commit_stats();  // group commit: puts per transaction
  j["store_commits"] = commits.batches;
  j["store_committed_puts"] = commits.entries;
  j["store_largest_batch"] = commits.largest_batch;
  j["store_coalesced_puts"] = commits.coalesced;
  j["running_jobs"] = pipeline->running_jobs();
  compiler::Planner::Counters pc = planner->counters();  // compiler/validation_memo.h
  j["validation_memo"] = {{"enabled", planner->has_validation_memo()},
                          {"served", pc.memo_served},
                          {"learned", pc.memo_learned},
                          {"refused", pc.memo_refused},
                          {"deferred", pc.memo_deferred},
                          {"probes", pc.memo_probes},
                          {"rechecked", pc.memo_rechecked},
                          {"sets_served", pc.memo_sets_served},
                          {"resets", pc.memo_resets},
                          {"watches", pc.memo_watches},
                          {"lessons_pending", planner->pending_lessons()},
                          {"lessons_learned", pc.lessons_learned},
                          {"lessons_unlearned", pc.lessons_unlearned},
                          {"lessons_dropped", pc.lessons_dropped}};
  j["metrics_port"] = metrics ? metrics->port() : 0;
  j["remote_skipped"] = r.remote.skipped;
  const workers::WorkerPoolStats& ws = r.workers;
  nlohmann::json& pool = j["worker_pool"];
  pool["starting"] = ws.starting;
  pool["peak_workers"] = ws.peak_workers;
  pool["warmed"] = ws.warmed;
  pool["exited"] = ws.exited;
  pool["following"] = ws.following;
  pool["waiting_for_worker"] = ws.waiting_for_worker;
  pool["killed"] = ws.killed;
  pool["zygotes_started"] = ws.zygotes_started;
  pool["forked"] = ws.forked;
  if (front) {
    j["resp_socket"] = front->unix_path();
    j["resp_port"] = front->tcp_port();
    j["resp_open_connections"] = r.front.open_connections;
    j["leases"]["leads"] = r.leases.leads;
    j["leases"]["waits"] = r.leases.waits;
  }
  return j;
}

void Service::Impl::tick() {
  auto now = std::chrono::steady_clock::now();
  worker_pool->tick();
  bool nothing_runs =
      pipeline->active_flights() == 0 && pipeline->pending() == 0 && runner->running_count() == 0;
  // What the misses left to learn (compiler/planner.h, defer_lessons), once
  // nothing else runs: on a build that fills every core it would lengthen
  // the build.
  if (nothing_runs && planner->pending_lessons() > 0 && !learning_lessons.exchange(true)) {
    scheduler->run_in_arena(
        [this] {
          pipeline->learn_lessons_while_idle();
          learning_lessons = false;
        },
        [this](const std::string& what) {
          spdlog::warn("learning the misses' lessons failed: {}", what);
          learning_lessons = false;
        });
  }
  if (now - last_flush >= kStoreFlushInterval) {
    last_flush = now;
    scheduler->run_in_arena([this] { refresh_store_stats(); });  // stats() flushes first
  }
  if (front) {
    uint64_t commands = front->counters().commands;
    if (commands != last_front_commands) {
      last_front_commands = commands;
      last_front_activity = now;
    }
  }
  // An open Redis-front connection is a client too: exiting under it would
  // also free the front's TCP port for another user to bind.
  bool front_open = front && front->counters().open_connections > 0;
  bool idle = hub->connection_count() == 0 && !front_open && nothing_runs;
  auto last = std::max(hub->last_activity(), last_front_activity);
  if (idle && options.idle_timeout.count() > 0 && now - last >= options.idle_timeout) {
    spdlog::info("idle for {} s: exiting",
                 std::chrono::duration_cast<std::chrono::seconds>(now - last).count());
    stop = true;
  }
}

void Service::Impl::refresh_store_stats() {
  auto stats = store->stats();
  if (!stats) {
    spdlog::warn("store stats: {}", stats.error().message);
    return;
  }
  StoreFigures figures = store_figures(*stats);
  MutexLock lock(&store_stats_mutex);
  store_stats = figures;
}

void Service::Impl::shutdown() {
  if (!hub) return;  // already done
  metrics.reset();   // first: its thread reads everything below
  hub->stop_accepting();
  front.reset();
  pipeline->stop_all();     // waiters get "stopping" and run the tool themselves
  worker_pool->shutdown();  // workers killed; ranks get "failed" and compile with their own pool
  hub->flush_pending(std::chrono::milliseconds(500));
  runner->terminate_all(kKillGrace);  // SIGTERM, then SIGKILL; reaps every group
  for (int i = 0; i < 500 && (pipeline->pending() > 0 || pipeline->active_flights() > 0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  worker_pool.reset();
  scheduler.reset();  // waits for arena work (finishing flights) to end
  runner.reset();
  pipeline.reset();
  hub.reset();
  kv.reset();
  storage.reset();  // commits the puts still queued, before the tier and the store go
  tier.reset();
  if (store) store->flush();
  store.reset();
  if (std::string root = state_dir + kWorkDirName; is_marked_work_dir(root)) remove_tree(root);
}

}  // namespace ccpool::service
