// Building the ExecRequest from the client process's own state, and the
// environment edits the client makes. Internal to client/ (tested directly).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/shim_env.h"
#include "ipc/protocol.h"

namespace ccpool::client {

// Sets NAME=value in `env`, replacing any earlier entry for NAME.
void set_env_entry(std::vector<std::string>& env, std::string_view name, std::string_view value);

// The current process environment (environ) as entries.
std::vector<std::string> current_environment();

// The entry "NAME=value" for NAME in `env`, or nullptr.
const std::string* find_env(const std::vector<std::string>& env, std::string_view name);

// RANK, else LOCAL_RANK, as a non-negative int; -1 when absent or not a number.
int32_t rank_from_env(const std::vector<std::string>& env);

// Resolves `program` like execvp: a name with '/' is taken relative to `cwd`,
// a bare name is searched in PATH (from `env`). kNotFound names the program.
Result<std::string> resolve_program(const std::string& program, const std::string& cwd,
                                    const std::vector<std::string>& env);

// The request for running `program` with `argv` from this process: getcwd,
// environment without the shim, getpid, rank, umask.
Result<ipc::ExecRequest> build_request(const std::string& program,
                                       const std::vector<std::string>& argv,
                                       const std::vector<std::string>& inputs,
                                       const std::vector<std::string>& outputs);

}  // namespace ccpool::client
