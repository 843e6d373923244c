// The interpreter and environment a rank's compile jobs must run in. A job runs
// only in a worker of an identical Environment: the same Python (by identity,
// not name), working directory, worker options and environment variables,
// except the variables that differ by rank and that no compile reads.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/error.h"

namespace ccpool::workers {

struct PoolRequest {  // what a rank's pool-open says (ipc::PoolOpen)
  std::string python;
  std::string cwd;
  std::vector<std::string> env;   // "NAME=value"
  std::vector<std::string> args;  // "--name=value"
};

struct Environment {
  std::string id;      // XXH3-128 of everything below plus the interpreter's identity
  std::string python;  // absolute, as the rank named it
  std::string cwd;
  std::vector<std::string>
      env;  // what a worker gets (sorted; per-rank variables and the shim removed)
  std::vector<std::string> args;
};

// Variables that differ between the ranks of one job and that no compile
// reads: they are neither part of the identity nor given to workers.
bool is_per_rank_variable(const std::string& name);

// Validates the request (the interpreter exists and is executable, cwd is a
// directory) and builds its Environment: the shim leaves LD_PRELOAD,
// `python_dir` (it holds the ccpool package) goes first on the workers'
// PYTHONPATH, `extra` ("NAME=value") is added for the workers.
Result<std::shared_ptr<const Environment>> make_environment(const PoolRequest& request,
                                                            const std::string& python_dir,
                                                            const std::vector<std::string>& extra);

}  // namespace ccpool::workers
