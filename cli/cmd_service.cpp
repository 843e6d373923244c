// serve, status, stop and exec.
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/fs.h"
#include "base/paths.h"
#include "base/process_facts.h"
#include "base/units.h"
#include "cli/commands.h"
#include "cli/logging.h"
#include "cli/service_control.h"
#include "client/client_main.h"
#include "ipc/client.h"
#include "launch/launch_env.h"
#include "service/activation.h"
#include "service/metrics.h"
#include "service/service.h"

namespace ccpool::cli {
namespace {

struct ServeFlags {
  std::string dir, socket, jobs, mem_budget, job_timeout, idle_timeout = "1h", max_size;
  std::string worker_idle_timeout = "60s";
  std::string remote, remote_prefix = "ccpool:", remote_ttl = "7d", remote_timeout = "300ms";
  std::string remote_max_value = "256M", remote_hmac_key_file, resp_password_file;
  int resp_port = 0;
  int resp_threads = 0;  // 0: automatic
  bool remote_unsigned = false;
  int metrics_port = -1;
  bool no_resp = false;
  bool validation_memo = false;
  bool no_validation_memo = false;
  bool foreground = false;
};

service::Service* g_service = nullptr;

void on_stop_signal(int) {
  if (g_service != nullptr) g_service->request_stop();
}

std::string env_or(const char* name, const std::string& fallback) {
  std::optional<std::string> v = own_env(name);
  return (v && !v->empty()) ? *v : fallback;
}

// The message says what and how to fix it already.
template <typename T>
T value_or_fail_plain(Result<T> r) {
  if (!r) fail(kExitUsage, r.error().message);
  return std::move(*r);
}

template <typename T>
T value_or_fail(Result<T> r, const std::string& what) {
  if (!r) fail(kExitUsage, what + ": " + r.error().message);
  return std::move(*r);
}

service::ServiceOptions resolve(const ServeFlags& f) {
  service::ServiceOptions o;
  o.socket_path = default_socket_path(f.socket);
  o.store_dir = f.dir;
  o.jobs = value_or_fail_plain(jobs_setting(f.jobs, env_or("CCPOOL_JOBS", "")));
  std::string budget = f.mem_budget.empty() ? env_or("CCPOOL_MEM_BUDGET", "") : f.mem_budget;
  if (!budget.empty()) o.mem_budget = value_or_fail(parse_size(budget), "--mem-budget");
  if (!f.max_size.empty()) o.max_size = value_or_fail(parse_size(f.max_size), "--max-size");
  if (!f.job_timeout.empty())
    o.job_timeout = value_or_fail(parse_duration(f.job_timeout), "--job-timeout");
  o.idle_timeout = value_or_fail(parse_duration(f.idle_timeout), "--idle-timeout");
  o.worker_idle_timeout =
      value_or_fail(parse_duration(f.worker_idle_timeout), "--worker-idle-timeout");
  if (o.worker_idle_timeout.count() <= 0)
    fail(kExitUsage, "--worker-idle-timeout must be positive, e.g. 60s");
  {
    std::string exe = self_executable();
    o.python_dir = launch::python_dir_for(exe.substr(0, exe.rfind('/')));
  }
  std::string remote = f.remote.empty() ? env_or("CCPOOL_REMOTE", "") : f.remote;
  if (!remote.empty()) {
    remote::RemoteOptions r;
    r.url = remote;
    r.password_file = env_or("CCPOOL_REMOTE_PASSWORD_FILE", "");
    r.hmac_key_file = f.remote_hmac_key_file.empty() ? env_or("CCPOOL_REMOTE_KEY_FILE", "")
                                                     : f.remote_hmac_key_file;
    r.key_prefix = f.remote_prefix;
    r.ttl = std::chrono::duration_cast<std::chrono::seconds>(
        value_or_fail(parse_duration(f.remote_ttl), "--remote-ttl"));
    r.op_timeout = r.connect_timeout =
        value_or_fail(parse_duration(f.remote_timeout), "--remote-timeout");
    r.max_value = value_or_fail(parse_size(f.remote_max_value), "--remote-max-value");
    bool unsigned_ok = f.remote_unsigned || env_or("CCPOOL_REMOTE_UNSIGNED", "0") != "0";
    if (r.hmac_key_file.empty() && !unsigned_ok) {
      fail(kExitUsage,
           "--remote '" + remote +
               "' needs --remote-key-file FILE (or CCPOOL_REMOTE_KEY_FILE): without a shared key, "
               "anyone who can write to that Redis can serve any object to every node. Create one "
               "with 'head -c 32 /dev/urandom | base64 > FILE; chmod 600 FILE' on every node, or "
               "pass --remote-unsigned to accept unsigned entries anyway");
    }
    o.remote = r;
  }
  o.resp_enabled = !f.no_resp;
  // On unless --no-validation-memo or CCPOOL_VALIDATION_MEMO=0; the flags win over the variable.
  o.validation_memo = f.no_validation_memo ? false
                      : f.validation_memo  ? true
                                           : env_or("CCPOOL_VALIDATION_MEMO", "1") != "0";
  // A benchmark's switch, not a user's: CCPOOL_IO_THREAD_HITS=0 hands every request to a
  // request thread (BENCHMARKS.md, "hand-offs").
  o.hits_on_io_thread = env_or("CCPOOL_IO_THREAD_HITS", "1") != "0";
  if (f.metrics_port > 65535 || f.metrics_port < -1) {
    fail(kExitUsage, "invalid --metrics-port " + std::to_string(f.metrics_port) +
                         "; use 1-65535 (0: any free port)");
  }
  o.metrics_port = f.metrics_port;
  if (f.resp_port < 0 || f.resp_port > 65535) {
    fail(kExitUsage, "invalid --resp-port " + std::to_string(f.resp_port) + "; use 1-65535");
  }
  o.resp_port = f.resp_port;
  if (f.resp_threads < 0 || f.resp_threads > 64) {
    fail(kExitUsage,
         "invalid --resp-threads " + std::to_string(f.resp_threads) + "; use 1-64 (0: automatic)");
  }
  o.resp_threads = static_cast<size_t>(f.resp_threads);
  if (!f.resp_password_file.empty()) {
    auto pw = read_secret_file(f.resp_password_file);
    if (!pw) fail(kExitUsage, "--resp-password-file: " + pw.error().message);
    while (!pw->empty() && (pw->back() == '\n' || pw->back() == '\r')) pw->pop_back();
    o.resp_password = *pw;
  }
  return o;
}

// A socket named `sock` keeps its state in its own directory. When that is a
// shared one (/tmp), "chmod 700 /tmp" is the wrong fix: say where to put it.
std::string state_dir_advice(const Error& e, const std::string& socket) {
  if (e.code != ErrorCode::kPermission ||
      state_dir_for_socket(socket) + "/" + kDefaultSocketName != socket) {
    return e.message;
  }
  std::string dir = state_dir_for_socket(socket);
  std::string base = dir == "/" ? "" : dir;
  return "cannot keep the service's state in '" + dir +
         "': " + e.message.substr(0, e.message.find(';')) +
         ". The socket's directory must be yours alone (clients refuse one others can write): use "
         "a directory of "
         "your own (--socket " +
         base + "/ccpool-" + std::to_string(::geteuid()) + "/sock)";
}

// Takes the instance lock of this socket (its state directory is its own).
// Returns the held fd, or -1 after printing which service holds it.
int take_lock(const std::string& state_dir, const std::string& socket) {
  std::string lock_path = state_dir + "/serve.lock";
  int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0)
    fail(kExitError, "cannot open lock file '" + lock_path + "': " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
  ::close(fd);
  auto pid = read_file(state_dir + "/serve.pid");
  std::string who = pid ? " (pid " + std::string(pid->substr(0, pid->find('\n'))) + ")" : "";
  std::fprintf(
      stderr,
      "ccpool: a service is already running on %s%s; stop it with 'ccpool stop --socket %s'\n",
      socket.c_str(), who.c_str(), socket.c_str());
  return -1;
}

int serve(const ServeFlags& flags) {
  service::ServiceOptions options = resolve(flags);
  options.faults = &process_faults();
  // Before anything forks: LISTEN_PID names this process.
  auto activation = service::take_activation_socket(options.socket_path);
  if (!activation) fail(kExitError, activation.error().message);
  bool activated = static_cast<bool>(*activation);
  std::string state_dir = state_dir_for_socket(options.socket_path);
  if (auto r = ensure_private_dir(state_dir); !r)
    fail(kExitError, state_dir_advice(r.error(), options.socket_path));
  int lock_fd = take_lock(state_dir, options.socket_path);
  if (lock_fd < 0) return kExitError;
  options.listen_fd = activation->release();

  int ready[2] = {-1, -1};
  // Under systemd the started process is the service: never daemonize.
  bool foreground = flags.foreground || activated;
  if (!foreground) {
    if (::pipe2(ready, O_CLOEXEC) != 0) fail(kExitError, "pipe failed");
    pid_t pid = ::fork();
    if (pid < 0) fail(kExitError, "fork failed");
    if (pid > 0) {
      // The parent reports whether the daemon came up, then leaves.
      ::close(ready[1]);
      char byte = 0;
      ssize_t n = ::read(ready[0], &byte, 1);
      if (n == 1) {
        std::printf("ccpool: serving on %s\n", options.socket_path.c_str());
        return kExitOk;
      }
      std::fprintf(stderr, "ccpool: the service failed to start; see %s/ccpool.log\n",
                   state_dir.c_str());
      return kExitError;
    }
    ::close(ready[0]);
    ::setsid();
    if (::fork() > 0) ::_exit(0);
    int devnull = ::open("/dev/null", O_RDWR);
    ::dup2(devnull, 0);
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
    if (devnull > 2) ::close(devnull);
    if (::chdir("/") != 0) {
    }
  }
  ::umask(022);
  setup_serve_logging(state_dir, foreground);
  if (activated) spdlog::info("socket-activated: accepting on the socket systemd passed");
  auto written =
      write_file_atomic(state_dir + "/serve.pid", std::to_string(::getpid()) + "\n", 0600);
  if (!written) spdlog::warn("{}", written.error().message);

  auto service = service::Service::create(options);
  if (!service) {
    spdlog::error("{}", service.error().message);
    if (foreground && !service::stderr_is_journal()) {
      std::fprintf(stderr, "ccpool: %s\n", service.error().message.c_str());
    }
    return kExitError;
  }
  g_service = service->get();
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  if (!foreground) ::signal(SIGHUP, SIG_IGN);
  if (ready[1] >= 0) {
    char byte = 1;
    [[maybe_unused]] ssize_t n = ::write(ready[1], &byte, 1);
    ::close(ready[1]);
  }
  int rc = (*service)->run();
  g_service = nullptr;
  service->reset();
  ::unlink((state_dir + "/serve.pid").c_str());
  ::close(lock_fd);
  spdlog::shutdown();
  return rc;
}

ipc::Client connect_or_fail(const std::string& socket) {
  auto client = ipc::Client::connect(socket, ipc::deadline_in(std::chrono::seconds(2)));
  // Unreachable: the client's message names the socket and the fix. Other
  // failures (refused, dropped) may not name the socket: add it.
  if (!client) {
    const std::string& message = client.error().message;
    fail(kExitError, message.find(socket) != std::string::npos
                         ? message
                         : "cannot use the ccpool service on '" + socket + "': " + message);
  }
  return std::move(*client);
}

void print_status_human(const nlohmann::json& j) {
  std::printf("service    pid %d on %s\n", j.value("pid", 0), j.value("socket", "").c_str());
  std::printf("pool       %d jobs, %s memory budget, %zu running (peak %zu), %zu queued\n",
              j.value("jobs", 0), format_size(j.value("mem_budget", 0ull)).c_str(),
              j.value("running", size_t{0}), j.value("peak_running", size_t{0}),
              j.value("queued", size_t{0}));
  std::printf("requests   %llu: %llu hits, %llu misses, %llu joins, %llu pass-through\n",
              j.value("requests", 0ull), j.value("hits", 0ull), j.value("misses", 0ull),
              j.value("joins", 0ull), j.value("passthrough", 0ull));
  for (const char* kind : {"passthrough_reasons", "not_stored_reasons"}) {
    if (!j.contains(kind) || !j[kind].is_object() || j[kind].empty()) continue;
    std::string line;
    for (const auto& [code, n] : j[kind].items()) {
      line += (line.empty() ? "" : ", ") + code + " " + std::to_string(n.get<uint64_t>());
    }
    std::printf("  %s: %s\n", kind[0] == 'p' ? "pass-through by reason" : "not stored by reason",
                line.c_str());
  }
  std::printf("executions %llu (%llu failed, %llu cancelled), %llu client fallbacks\n",
              j.value("executions", 0ull), j.value("failures", 0ull), j.value("cancelled", 0ull),
              j.value("fallbacks", 0ull));
  if (j.contains("worker_pool") && j["worker_pool"].is_object()) {
    const auto& w = j["worker_pool"];
    const nlohmann::json counts = w.value("counts", nlohmann::json::object());
    std::printf(
        "workers    %zu Inductor compile workers (%zu busy, peak %zu), %s, %zu ranks connected; "
        "%llu forked from %llu zygotes\n",
        w.value("workers", size_t{0}), w.value("busy", size_t{0}),
        w.value("peak_workers", size_t{0}), format_size(w.value("rss_bytes", 0ull)).c_str(),
        w.value("sessions", size_t{0}), w.value("forked", 0ull), w.value("zygotes_started", 0ull));
    std::printf(
        "  jobs %llu (%llu after an equal job of another rank, %zu waiting for one now), %llu "
        "failed, "
        "%llu cancelled; Triton kernels: %llu compiled, %llu from the store\n",
        w.value("jobs", 0ull), w.value("followed", 0ull), w.value("following", size_t{0}),
        w.value("failed", 0ull), w.value("cancelled", 0ull), counts.value("triton_compiles", 0ull),
        counts.value("triton_store_hits", 0ull));
  }
  if (j.contains("leases") && j["leases"].is_object()) {
    const auto& l = j["leases"];
    std::printf(
        "leases     %zu keys computed now, %zu clients waiting; waits: %llu served, %llu "
        "abandoned, "
        "%llu timed out\n",
        l.value("keys_in_flight", size_t{0}), l.value("waiting", size_t{0}),
        l.value("served", 0ull), l.value("abandoned", 0ull), l.value("timed_out", 0ull));
  }
  if (j.value("remote", false)) {
    std::printf("remote     %llu hits, %llu misses, %llu errors, %llu writes, breaker %s\n",
                j.value("remote_hits", 0ull), j.value("remote_misses", 0ull),
                j.value("remote_errors", 0ull), j.value("remote_writes", 0ull),
                j.value("breaker_open", false) ? "OPEN" : "closed");
  }
  if (j.contains("store") && j["store"].is_object()) {
    const auto& st = j["store"];
    std::printf("store      %llu entries, %s of %s, %s saved\n", st.value("entries", 0ull),
                format_size(st.value("stored_bytes", 0ull)).c_str(),
                format_size(st.value("max_size", 0ull)).c_str(),
                format_duration(std::chrono::milliseconds(st.value("time_saved_ms", 0ll))).c_str());
  }
  // `clients` counts this status request's own connection: leave it out.
  size_t clients = j.value("clients", size_t{0});
  std::printf("clients    %zu connected\n", clients > 0 ? clients - 1 : 0);
  if (j.value("metrics_port", 0) > 0) {
    std::printf("metrics    http://127.0.0.1:%d/metrics\n", j.value("metrics_port", 0));
  }
  for (const auto& job : j["running_jobs"]) {
    std::printf("  pid %-7d %-10s %6.1f s %8s  client %d  %s\n", job.value("pid", 0),
                job.value("tool", "").c_str(), job.value("elapsed_ms", 0) / 1000.0,
                format_size(job.value("rss", 0ull)).c_str(), job.value("client_pid", 0),
                job.value("argv", "").c_str());
  }
}

void register_serve(CLI::App& app) {
  auto flags = std::make_shared<ServeFlags>();
  auto* cmd = app.add_subcommand("serve", "Run the node service (one per user per node)");
  cmd->add_option(
      "--dir", flags->dir,
      "Store directory (default: $CCPOOL_DIR, else ${XDG_CACHE_HOME:-~/.cache}/ccpool)");
  cmd->add_option("--socket", flags->socket,
                  "Socket path (default: CCPOOL_SOCKET, $XDG_RUNTIME_DIR/ccpool/sock or "
                  "/tmp/ccpool-$UID/sock)");
  cmd->add_option("--jobs", flags->jobs,
                  "Concurrent tool processes (default: CCPOOL_JOBS or available CPUs)");
  cmd->add_option("--mem-budget", flags->mem_budget,
                  "Memory budget for running jobs, e.g. 8G (default: CCPOOL_MEM_BUDGET or min(80% "
                  "MemAvailable, cgroup limit))");
  cmd->add_option("--job-timeout", flags->job_timeout,
                  "Kill a job's process group after this long, e.g. 10m (default: none)");
  cmd->add_option("--idle-timeout", flags->idle_timeout,
                  "Exit after this long without clients or jobs (default: 1h; 0 = never)");
  cmd->add_option(
      "--worker-idle-timeout", flags->worker_idle_timeout,
      "An idle Inductor compile worker of the node pool exits after this (default: 60s)");
  cmd->add_option("--max-size", flags->max_size, "Store size bound (default: 10G)");
  cmd->add_option("--remote", flags->remote,
                  "Cluster tier: redis://host:port[/db] or unix:///path (default: CCPOOL_REMOTE)");
  cmd->add_option("--remote-prefix", flags->remote_prefix,
                  "Key prefix in Redis (default: ccpool:)");
  cmd->add_option("--remote-ttl", flags->remote_ttl,
                  "TTL of values written to Redis (default: 7d)");
  cmd->add_option("--remote-timeout", flags->remote_timeout,
                  "Connect and operation timeout for Redis (default: 300ms)");
  cmd->add_option("--remote-max-value", flags->remote_max_value,
                  "Larger values are not written to Redis (default: 256M)");
  cmd->add_option(
      "--remote-key-file", flags->remote_hmac_key_file,
      "Shared HMAC key file (mode 0600): sign entries and reject unsigned ones; required with "
      "--remote unless --remote-unsigned (default: CCPOOL_REMOTE_KEY_FILE)");
  cmd->add_flag("--remote-unsigned", flags->remote_unsigned,
                "Run the cluster tier without --remote-key-file: any writer of that Redis can "
                "serve objects to this node (also CCPOOL_REMOTE_UNSIGNED=1; logged as a warning)");
  cmd->add_option("--resp-port", flags->resp_port,
                  "Also serve the Redis-protocol front on 127.0.0.1:PORT");
  cmd->add_option("--resp-threads", flags->resp_threads,
                  "Event-loop threads of the Redis-protocol front (default 0: one, like "
                  "redis-server; four with --remote, whose lookups block their thread)");
  cmd->add_option("--resp-password-file", flags->resp_password_file,
                  "Require AUTH with the password in this file on the Redis-protocol front");
  cmd->add_option("--metrics-port", flags->metrics_port,
                  "Serve Prometheus metrics at http://127.0.0.1:PORT/metrics");
  cmd->add_flag("--no-resp", flags->no_resp, "Do not start the Redis-protocol front");
  cmd->add_flag("--validation-memo", flags->validation_memo,
                "Keep the answers of a hit's recorded lookups (file contents, absent paths, types, "
                "real paths) across requests while inotify reports no change to them (the "
                "default; uses up to a quarter of your inotify watch limit)");
  cmd->add_flag("--no-validation-memo", flags->no_validation_memo,
                "Validate every recorded lookup of every hit with its own system calls (also "
                "CCPOOL_VALIDATION_MEMO=0)");
  cmd->add_flag("--foreground", flags->foreground,
                "Do not daemonize; also log to stderr (implied under systemd socket activation)");
  cmd->callback([flags] { throw CLI::RuntimeError(serve(*flags)); });
}

void register_status(CLI::App& app) {
  auto socket = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto watch = std::make_shared<bool>(false);
  auto prometheus = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand("status", "Show the service's pool, counters and running jobs");
  cmd->add_option("--socket", *socket,
                  "Socket path (default: CCPOOL_SOCKET, $XDG_RUNTIME_DIR/ccpool/sock or "
                  "/tmp/ccpool-$UID/sock)");
  auto* json_flag =
      cmd->add_flag("--json", *json, "Print one JSON object (keys in docs/service.md)");
  auto* prom_flag = cmd->add_flag("--prometheus", *prometheus,
                                  "Print the metrics once, in the Prometheus text format");
  cmd->add_flag("--watch", *watch, "Refresh every second until interrupted");
  json_flag->excludes(prom_flag);
  cmd->callback([socket, json, watch, prometheus] {
    std::string path = default_socket_path(*socket);
    for (;;) {
      ipc::Client client = connect_or_fail(path);
      auto status = client.status_json(ipc::deadline_in(std::chrono::seconds(5)));
      if (!status) fail(kExitError, "status failed: " + status.error().message);
      if (*json) {
        std::printf("%s\n", status->c_str());
      } else if (*prometheus) {
        if (*watch) std::printf("\033[H\033[2J");
        auto parsed = nlohmann::json::parse(*status, nullptr, false);
        if (parsed.is_discarded()) fail(kExitError, "the service sent a status that is not JSON");
        std::fputs(service::render_metrics(parsed, service::MetricsFormat::kPrometheusText).c_str(),
                   stdout);
      } else {
        if (*watch) std::printf("\033[H\033[2J");
        print_status_human(nlohmann::json::parse(*status));
      }
      std::fflush(stdout);
      if (!*watch) break;
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  });
}

void register_stop(CLI::App& app) {
  auto socket = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand(
      "stop", "Stop the service: waiters run their tools locally, jobs are killed");
  cmd->add_option("--socket", *socket,
                  "Socket path (default: CCPOOL_SOCKET, $XDG_RUNTIME_DIR/ccpool/sock or "
                  "/tmp/ccpool-$UID/sock)");
  cmd->callback([socket] {
    std::string path = default_socket_path(*socket);
    ipc::Client client = connect_or_fail(path);
    if (auto r = client.stop(ipc::deadline_in(std::chrono::seconds(5))); !r) {
      fail(kExitError, "stop failed: " + r.error().message);
    }
    // Wait until it is gone, so a following `serve` finds the lock free.
    std::string lock = state_dir_for_socket(path) + "/serve.lock";
    for (int i = 0; i < 300; ++i) {
      int fd = ::open(lock.c_str(), O_RDWR | O_CLOEXEC);
      if (fd < 0) break;
      bool free_now = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
      ::close(fd);
      if (free_now) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::printf("ccpool: stopped the service on %s\n", path.c_str());
  });
}

// `exec` runs from main() through client::parse_exec_args, which keeps every
// argument after PROGRAM verbatim. CLI11 only sees the forms that parser
// refuses (--help, an unknown option, no program), so its callback never runs
// a command: CLI11 would treat dash arguments after PROGRAM as its own.
void register_exec(CLI::App& app) {
  auto* cmd = app.add_subcommand("exec", "Run PROGRAM through the service (cached when it can be)");
  auto unused = std::make_shared<std::vector<std::string>>();
  cmd->add_option("--socket",
                  "Socket path (default: CCPOOL_SOCKET, $XDG_RUNTIME_DIR/ccpool/sock or "
                  "/tmp/ccpool-$UID/sock)");
  cmd->add_option("--input", "A file the command reads (declared jobs are cached)");
  cmd->add_option("--output", "A file the command writes");
  cmd->add_option("command", *unused, "The command, after --: PROGRAM ARGS...");
  cmd->callback([] {
    fail(kExitUsage,
         "usage: ccpool exec [--socket S] [--input FILE]... [--output FILE]... -- PROGRAM ARGS...");
  });
}

}  // namespace

void register_service_commands(CLI::App& app) {
  register_serve(app);
  register_status(app);
  register_stop(app);
  register_exec(app);
}

}  // namespace ccpool::cli
