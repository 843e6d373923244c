// See environment.h.
#include "workers/environment.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "base/hash.h"
#include "base/shim_env.h"

namespace ccpool::workers {

bool is_per_rank_variable(const std::string& name) {
  static const char* const kNames[] = {
      "RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK", "TORCHELASTIC_ERROR_FILE", "SLURM_PROCID",
      "SLURM_LOCALID", "SLURM_TASK_PID", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
      "PMI_RANK", "PMIX_RANK", "CUDA_VISIBLE_DEVICES", "PWD", "OLDPWD", "SHLVL", "_",
      // A launch's rendezvous, new for every job: no compile reads it.
      "MASTER_ADDR", "MASTER_PORT"};
  for (const char* n : kNames) {
    if (name == n) return true;
  }
  // The service's own settings (given to workers explicitly) and torchrun's
  // agent settings (run id, restart count, error file, store).
  return name.rfind("CCPOOL_", 0) == 0 || name.rfind("TORCHELASTIC_", 0) == 0;
}

Result<std::shared_ptr<const Environment>> make_environment(const PoolRequest& request,
                                                            const std::string& python_dir,
                                                            const std::vector<std::string>& extra) {
  struct stat py {};
  std::string why;
  if (request.python.empty() || request.python[0] != '/') {
    why = "not an absolute path";
  } else if (::stat(request.python.c_str(), &py) != 0) {
    why = std::strerror(errno);
  } else if (!S_ISREG(py.st_mode) || ::access(request.python.c_str(), X_OK) != 0) {
    why = "not an executable file";
  }
  if (!why.empty()) {
    return make_error(ErrorCode::kInvalidArgument,
                      "the rank's interpreter '" + request.python + "': " + why +
                          "; the rank keeps Inductor's own compile workers");
  }
  struct stat dir {};
  if (::stat(request.cwd.c_str(), &dir) != 0 || !S_ISDIR(dir.st_mode)) {
    return make_error(ErrorCode::kInvalidArgument, "the rank's working directory '" + request.cwd +
                                                       "' is not a directory the service can see");
  }
  std::map<std::string, std::string> vars;
  for (const std::string& entry : request.env) {
    size_t eq = entry.find('=');
    std::string name = entry.substr(0, eq);
    if (!is_per_rank_variable(name)) vars[name] = entry.substr(eq + 1);
  }
  // Workers run their compilers themselves: a worker holds a pool slot, and
  // its ptxas going through the pool again could wait on itself.
  if (auto it = vars.find("LD_PRELOAD"); it != vars.end()) {
    it->second = strip_shim_from_preload(it->second);
    if (it->second.empty()) vars.erase(it);
  }
  std::string& path = vars["PYTHONPATH"];
  path = path.empty() ? python_dir : python_dir + ":" + path;
  vars["TORCH_WARM_POOL"] = "0";  // a worker never starts a pool of its own
  for (const std::string& entry : extra) {
    size_t eq = entry.find('=');
    vars[entry.substr(0, eq)] = eq == std::string::npos ? "" : entry.substr(eq + 1);
  }

  auto env = std::make_shared<Environment>();
  env->python = request.python;
  env->cwd = request.cwd;
  env->args = request.args;
  for (const auto& [name, value] : vars) env->env.push_back(name + "=" + value);
  // Identity: the interpreter by what it is (an upgraded or replaced binary
  // at the same path is another interpreter), then everything a worker gets.
  std::string identity = "python " + request.python + " " + std::to_string(py.st_dev) + ":" +
                         std::to_string(py.st_ino) + ":" + std::to_string(py.st_size) + ":" +
                         std::to_string(py.st_mtim.tv_sec) + "." +
                         std::to_string(py.st_mtim.tv_nsec) + "\n";
  identity += "cwd " + request.cwd + "\n";
  for (const std::string& a : env->args) identity += "arg " + a + "\n";
  for (const std::string& e : env->env) identity += "env " + e + "\n";
  env->id = hash_bytes(identity).hex();
  return std::shared_ptr<const Environment>(std::move(env));
}

}  // namespace ccpool::workers
