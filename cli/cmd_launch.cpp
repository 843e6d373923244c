// ccpool run / ccpool env: give a job the shim, the socket and the fair-share
// worker caps, and (run) supervise it so nothing is left behind.
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "base/paths.h"
#include "base/process_facts.h"
#include "base/units.h"
#include "cli/commands.h"
#include "cli/service_control.h"
#include "launch/launch_env.h"
#include "launch/supervisor.h"

namespace ccpool::cli {

namespace {

struct LaunchFlags {
  std::string jobs;  // read by flag_jobs()
  int ranks = 0;
  int resp_port = 0;
  std::string mem_budget;
  std::string grace = "5s";
  std::string socket;
  std::string dir;
  std::string shell = "sh";
  bool verbose = false;
  bool frameworks_cache = false;
  bool no_python_hooks = false;
  bool start_service = false;  // env: make sure the service runs first, as run does
  std::vector<std::string> command;
};

// The shim and the client are found relative to this directory.
std::string exe_dir() {
  std::string exe = self_executable();
  size_t slash = exe.rfind('/');
  if (slash == std::string::npos) fail(kExitError, "cannot read /proc/self/exe; is /proc mounted?");
  return exe.substr(0, slash);
}

// --jobs by the one grammar (base/process_facts.h); 0 when not given.
int flag_jobs(const LaunchFlags& flags) {
  auto jobs = jobs_setting(flags.jobs, "");
  if (!jobs) fail(kExitUsage, jobs.error().message);
  return *jobs;
}

launch::LaunchEnv compute_env(const LaunchFlags& flags, const launch::EnvMap& env) {
  launch::LaunchOptions options;
  options.jobs = flag_jobs(flags);
  options.ranks = flags.ranks;
  options.socket = default_socket_path(flags.socket);
  options.exe_dir = exe_dir();
  options.frameworks_cache = flags.frameworks_cache;
  options.resp_port = flags.resp_port;
  options.python_hooks = !flags.no_python_hooks;
  auto computed = launch::compute_launch_env(options, flags.command, env);
  if (!computed) fail(kExitUsage, computed.error().message);
  return std::move(*computed);
}

// CLI11's PositiveNumber reports "Value 0 not in range 0.000000 to 1.79e308".
CLI::Validator positive_count() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        char* end = nullptr;
        errno = 0;
        long n = std::strtol(value.c_str(), &end, 10);
        bool ok = !value.empty() && *end == '\0' && errno == 0 && n > 0 && n <= 1'000'000;
        return ok ? std::string() : "'" + value + "' is not a positive whole number";
      },
      "POSITIVE");
}

void add_common_options(CLI::App* sub, LaunchFlags& flags) {
  sub->add_option("--jobs,-j", flags.jobs,
                  "Compiler slots on this node (default: CCPOOL_JOBS, else CPUs)");
  sub->add_option("--ranks", flags.ranks,
                  "Ranks per node (default: from the launcher's argv or env)")
      ->check(positive_count());
  sub->add_option("--socket", flags.socket,
                  "Socket path (default: CCPOOL_SOCKET, $XDG_RUNTIME_DIR/ccpool/sock or "
                  "/tmp/ccpool-$UID/sock)");
  sub->add_flag("--frameworks-cache", flags.frameworks_cache,
                "Point Inductor and Triton remote caches at the service's Redis front");
  sub->add_option("--resp-port", flags.resp_port, "TCP port of the Redis front (for Triton)");
  sub->add_flag(
      "--no-python-hooks", flags.no_python_hooks,
      "Do not hook Python processes (Inductor's workers stay per rank, graphs compile per rank)");
}

// Starts the service unless it runs (run, env --start-service), with the
// settings the flags give a service this starts.
void start_service(const LaunchFlags& flags) {
  ServiceSettings settings;
  settings.socket = default_socket_path(flags.socket);
  settings.store_dir = flags.dir;
  settings.jobs = flag_jobs(flags);
  settings.resp_port = flags.resp_port;
  if (!flags.mem_budget.empty()) {
    auto budget = parse_size(flags.mem_budget);
    if (!budget) fail(kExitUsage, "--mem-budget: " + budget.error().message);
    settings.mem_budget = *budget;
  }
  auto started = ensure_service(settings);
  if (!started) fail(kExitError, started.error().message);
  if (flags.frameworks_cache) {
    auto trusted = check_resp_socket(state_dir_for_socket(settings.socket) + "/resp.sock");
    if (!trusted) fail(kExitError, "--frameworks-cache: " + trusted.error().message);
  }
}

void run_command(const LaunchFlags& flags) {
  if (flags.command.empty())
    fail(kExitUsage, "no command given; usage: ccpool run [options] -- CMD ARGS...");
  auto grace = parse_duration(flags.grace);
  if (!grace) fail(kExitUsage, "--grace: " + grace.error().message);
  launch::EnvMap env = launch::current_environment();
  launch::LaunchEnv job_env = compute_env(flags, env);
  // CCPOOL_RUN_NO_SERVICE=1 is test-only: run the job without starting a service.
  if (own_env("CCPOOL_RUN_NO_SERVICE") != "1") start_service(flags);
  if (flags.verbose) {
    for (const launch::EnvSetting& s : job_env.settings) {
      std::fprintf(stderr, "ccpool run: %s %s=%s (%s)\n", s.kept ? "kept" : "set", s.name.c_str(),
                   s.value.c_str(), s.reason.c_str());
    }
  }
  launch::SuperviseOptions options;
  options.grace = *grace;
  options.verbose = flags.verbose;
  auto result =
      launch::run_supervised(flags.command, launch::apply_launch_env(job_env, env), options);
  if (!result)
    fail(result.error().code == ErrorCode::kNotFound ? 127 : 126, result.error().message);
  if (result->exit_code != 0) throw CLI::RuntimeError(result->exit_code);
}

void env_command(const LaunchFlags& flags) {
  auto shell = launch::parse_shell(flags.shell);
  if (!shell) fail(kExitUsage, shell.error().message);
  launch::LaunchEnv job_env = compute_env(flags, launch::current_environment());
  if (flags.start_service) start_service(flags);
  std::string hint = exe_dir() + "/ccpool serve --socket " + default_socket_path(flags.socket);
  if (int jobs = flag_jobs(flags); jobs > 0) hint += " --jobs " + std::to_string(jobs);
  std::fputs(launch::render_launch_env(job_env, *shell, hint).c_str(), stdout);
}

}  // namespace

void register_launch_commands(CLI::App& app) {
  // Owned for the life of the process: CLI11 callbacks refer to it.
  static LaunchFlags* flags = new LaunchFlags();

  CLI::App* run =
      app.add_subcommand("run", "Run a job with every compiler routed to the node service");
  add_common_options(run, *flags);
  run->add_option("--mem-budget", flags->mem_budget,
                  "Memory budget of a service this starts, e.g. 16G");
  run->add_option("--grace", flags->grace,
                  "Time between the first forwarded signal and SIGKILL (default: 5s)");
  run->add_option("--dir", flags->dir, "Store directory of a service this starts");
  run->add_flag("--verbose,-v", flags->verbose, "Print each variable set or kept, and why");
  // Everything from the first non-option (or after "--") is the job's argv.
  // CLI11 2.1 needs all three settings for both spellings to work.
  run->add_option("command", flags->command, "The job: CMD ARGS...");
  run->positionals_at_end();
  run->prefix_command();
  run->footer("usage: ccpool run [options] [--] CMD ARGS...");
  run->callback([] { run_command(*flags); });

  CLI::App* env =
      app.add_subcommand("env", "Print the job environment for launchers that cannot wrap");
  add_common_options(env, *flags);
  env->add_option("--shell", flags->shell, "Output syntax: sh (default), fish or json");
  env->add_flag(
      "--start-service", flags->start_service,
      "Start the service first unless it runs, as ccpool run does (ccpool.enable() uses this)");
  env->add_option("--mem-budget", flags->mem_budget,
                  "Memory budget of a service --start-service starts, e.g. 16G");
  env->add_option("--dir", flags->dir, "Store directory of a service --start-service starts");
  env->callback([] { env_command(*flags); });
}

}  // namespace ccpool::cli
