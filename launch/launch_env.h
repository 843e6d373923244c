// The environment `ccpool run` and `ccpool env` give a job: the shim on
// LD_PRELOAD, the service socket, and framework worker caps set to the fair
// share max(1, jobs / ranks). Pure functions over an explicit environment map,
// so they are testable without processes.
//
// Rule: a variable the user already set is never overridden (LD_PRELOAD is the
// exception in kind, not in spirit: the shim is prepended, the user's entries
// are kept after it).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/error.h"

namespace ccpool::launch {

using EnvMap = std::map<std::string, std::string>;

struct LaunchOptions {
  int jobs = 0;                   // --jobs; 0: CCPOOL_JOBS, else available CPUs
  int ranks = 0;                  // --ranks; 0: parsed from the command, else env, else 1
  std::string socket;             // resolved service socket path
  std::string exe_dir;            // directory of the ccpool executable
  bool frameworks_cache = false;  // point Inductor/Triton remote caches at the RESP front
  int resp_port = 0;              // --resp-port; 0: no TCP front (TRITON_REDIS_* left unset)
  // Hook every Python process of the job (python/ccpool/_bootstrap on
  // PYTHONPATH): Inductor's compile workers in the node pool, graph compiles
  // single-flight through the front. --no-python-hooks / CCPOOL_PYTHON_HOOKS=0.
  bool python_hooks = true;
};

// One variable of the computed environment, with why it has its value.
struct EnvSetting {
  std::string name;
  std::string value;   // the value the job will see
  bool kept = false;   // true: the user's value was kept and nothing was set
  std::string reason;  // human text for --verbose
};

struct LaunchEnv {
  int jobs = 1;
  int ranks = 1;
  int workers = 1;                   // fair share: max(1, jobs / ranks)
  std::string ranks_source;          // "--ranks", "--nproc-per-node", "LOCAL_WORLD_SIZE", ...
  std::vector<EnvSetting> settings;  // in a stable order
};

// Snapshot of the process environment (environ).
EnvMap current_environment();

// Ranks per node from a launcher command line: torchrun's --nproc-per-node /
// --nproc_per_node (separate or =value), accelerate's --num_processes /
// --num-processes. Returns 0 when none is found or the value is not a
// positive integer ("gpu", "auto" are not numbers).
int ranks_from_command(const std::vector<std::string>& command);

// Shim path relative to the executable dir: <exe_dir>/../lib/libccpool-shim.so.
std::string shim_path_for(const std::string& exe_dir);
// Client path: <exe_dir>/ccpool-client.
std::string client_path_for(const std::string& exe_dir);
// The Python package's directory: <exe_dir>/../share/ccpool/python (holds ccpool/).
std::string python_dir_for(const std::string& exe_dir);

// Computes the job environment. `command` is the job's argv (may be empty for
// `ccpool env`). Fails with kInvalidArgument on a CCPOOL_JOBS the jobs grammar
// refuses (read only without options.jobs), or a non-numeric LOCAL_WORLD_SIZE
// or SLURM_NTASKS_PER_NODE, naming the variable.
Result<LaunchEnv> compute_launch_env(const LaunchOptions& options,
                                     const std::vector<std::string>& command, const EnvMap& env);

// `env` with every non-kept setting applied, as "NAME=value" strings for execve.
std::vector<std::string> apply_launch_env(const LaunchEnv& launch_env, const EnvMap& env);

enum class Shell { kSh, kFish, kJson };
Result<Shell> parse_shell(const std::string& name);  // "sh", "bash", "zsh", "fish", "json"

// Renders every setting (kept ones too, with their current value) for a shell.
// sh/fish output starts with a comment line: how to start the service.
// json is one object {"NAME": "value", ...} (no comment).
std::string render_launch_env(const LaunchEnv& launch_env, Shell shell,
                              const std::string& service_hint);

}  // namespace ccpool::launch
