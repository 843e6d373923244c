// See launch_env.h.
#include "launch/launch_env.h"

#include <unistd.h>

#include <charconv>
#include <string_view>

#include "base/paths.h"
#include "base/process_facts.h"

extern char** environ;

namespace ccpool::launch {
namespace {

// Positive decimal integer, or 0.
int parse_positive(std::string_view text) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value <= 0) return 0;
  return value;
}

Result<int> positive_env(const EnvMap& env, const std::string& name) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return 0;
  int value = parse_positive(it->second);
  if (value == 0) {
    return make_error(ErrorCode::kInvalidArgument,
                      name + "='" + it->second + "' is not a positive integer; unset it or fix it");
  }
  return value;
}

struct Ranks {
  int count;
  std::string source;
};

Result<Ranks> decide_ranks(const LaunchOptions& options, const std::vector<std::string>& command,
                           const EnvMap& env) {
  if (options.ranks > 0) return Ranks{options.ranks, "--ranks"};
  if (int r = ranks_from_command(command); r > 0) return Ranks{r, "the launcher's command line"};
  for (const char* name : {"LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE"}) {
    CCPOOL_TRY_ASSIGN(int r, positive_env(env, name));
    if (r > 0) return Ranks{r, name};
  }
  return Ranks{1, "default"};
}

// Whether a list separated by ':' or blanks (LD_PRELOAD takes both) has `entry`.
bool list_holds(std::string_view list, std::string_view entry) {
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find_first_of(": ", start);
    if (end == std::string_view::npos) end = list.size();
    if (list.substr(start, end - start) == entry) return true;
    start = end + 1;
  }
  return false;
}

// A list the job needs `entry` first in: set, kept when already
// there, or prepended to the user's value (whose entries all stay).
void prepend_path(LaunchEnv& out, const EnvMap& env, const std::string& name,
                  const std::string& entry, const std::string& why) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty()) {
    out.settings.push_back({name, entry, false, why});
  } else if (list_holds(it->second, entry)) {
    out.settings.push_back({name, it->second, true, "already holds " + entry + "; kept"});
  } else {
    out.settings.push_back(
        {name, entry + ":" + it->second, false, why + "; prepended to the user's value"});
  }
}

}  // namespace

EnvMap current_environment() {
  EnvMap env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view entry(*e);
    size_t eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    env.emplace(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  return env;
}

int ranks_from_command(const std::vector<std::string>& command) {
  static constexpr std::string_view kFlags[] = {"--nproc-per-node", "--nproc_per_node",
                                                "--num_processes", "--num-processes"};
  for (size_t i = 0; i < command.size(); ++i) {
    std::string_view arg = command[i];
    if (arg == "--") break;
    for (std::string_view flag : kFlags) {
      if (arg == flag && i + 1 < command.size()) return parse_positive(command[i + 1]);
      if (arg.size() > flag.size() && arg.substr(0, flag.size()) == flag &&
          arg[flag.size()] == '=') {
        return parse_positive(arg.substr(flag.size() + 1));
      }
    }
  }
  return 0;
}

std::string shim_path_for(const std::string& exe_dir) {
  return exe_dir + "/../lib/libccpool-shim.so";
}

std::string client_path_for(const std::string& exe_dir) {
  return exe_dir + "/ccpool-client";
}

std::string python_dir_for(const std::string& exe_dir) {
  return exe_dir + "/../share/ccpool/python";
}

Result<LaunchEnv> compute_launch_env(const LaunchOptions& options,
                                     const std::vector<std::string>& command, const EnvMap& env) {
  LaunchEnv out;
  auto env_jobs = env.find("CCPOOL_JOBS");
  CCPOOL_TRY_ASSIGN(
      int jobs, options.jobs > 0 ? Result<int>(options.jobs)
                                 : jobs_setting("", env_jobs == env.end() ? "" : env_jobs->second));
  out.jobs = jobs > 0 ? jobs : available_cpus();
  CCPOOL_TRY_ASSIGN(Ranks ranks, decide_ranks(options, command, env));
  out.ranks = ranks.count;
  out.ranks_source = ranks.source;
  out.workers = std::max(1, out.jobs / out.ranks);

  auto set = [&](const std::string& name, const std::string& value, const std::string& why) {
    auto it = env.find(name);
    if (it != env.end()) {
      out.settings.push_back({name, it->second, true, "already set by the user; kept"});
    } else {
      out.settings.push_back({name, value, false, why});
    }
  };

  prepend_path(out, env, "LD_PRELOAD", shim_path_for(options.exe_dir),
               "routes compiler execs to the service");
  set("CCPOOL_SOCKET", options.socket, "the service socket");
  set("CCPOOL_CLIENT", client_path_for(options.exe_dir), "the client the shim execs");
  std::string share = std::to_string(out.workers);
  std::string why = "fair share max(1, jobs " + std::to_string(out.jobs) + " / ranks " +
                    std::to_string(out.ranks) + " from " + out.ranks_source + ")";
  set("CCPOOL_WORKERS", share, why + "; caps Inductor's compile-worker sidecar");
  bool hooks = options.python_hooks;
  if (auto it = env.find("CCPOOL_PYTHON_HOOKS"); it != env.end() && it->second == "0")
    hooks = false;
  if (hooks) {
    // The node pool bounds the processes; a rank may keep up to `jobs`
    // requests in flight (and more than one, or Inductor compiles Triton
    // kernels in the rank itself instead of sending them to a pool).
    std::string threads = std::to_string(std::max(2, out.jobs));
    set("TORCHINDUCTOR_COMPILE_THREADS", threads,
        "max(2, jobs " + std::to_string(out.jobs) +
            "): the node pool bounds compiles; fair share without hooks " + share);
    prepend_path(
        out, env, "PYTHONPATH", python_dir_for(options.exe_dir) + "/ccpool/_bootstrap",
        "ccpool's Python hooks: Inductor's workers in the node pool, graph compiles once per node");
    set("CCPOOL_RESP_SOCKET", state_dir_for_socket(options.socket) + "/resp.sock",
        "the Redis front the Python hooks use");
  } else {
    set("TORCHINDUCTOR_COMPILE_THREADS", share, why);
  }

  if (options.frameworks_cache) {
    std::string state_dir = state_dir_for_socket(options.socket);
    set("TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE", "1", "Inductor FX graph cache on the RESP front");
    set("TORCHINDUCTOR_AUTOTUNE_REMOTE_CACHE", "1", "Inductor autotune cache on the RESP front");
    set("TORCHINDUCTOR_REDIS_URL", "unix://" + state_dir + "/resp.sock", "the RESP front socket");
    // TRITON_CACHE_MANAGER is left to the user: Triton 3.7.1's own
    // RedisRemoteCacheBackend cannot be constructed (it reads knobs.cache.redis),
    // so setting it would make every Triton compile raise. Triton's one
    // subprocess, ptxas, is cached by the service by content anyway.
    if (options.resp_port > 0) {
      set("TRITON_REDIS_HOST", "127.0.0.1", "Triton speaks TCP only: the RESP front's port");
      set("TRITON_REDIS_PORT", std::to_string(options.resp_port), "--resp-port");
    }
  }
  return out;
}

std::vector<std::string> apply_launch_env(const LaunchEnv& launch_env, const EnvMap& env) {
  EnvMap merged = env;
  for (const EnvSetting& s : launch_env.settings) {
    if (!s.kept) merged[s.name] = s.value;
  }
  std::vector<std::string> out;
  out.reserve(merged.size());
  for (const auto& [name, value] : merged) out.push_back(name + "=" + value);
  return out;
}

}  // namespace ccpool::launch
