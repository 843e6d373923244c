// Short helper processes the models run themselves (`cc --version`, `-###`,
// `-E -v`): posix_spawn + pipes + waitpid with a deadline. Never used for the
// real tool execution, which belongs to the service's pool.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/shim_env.h"

namespace ccpool::compiler {

struct HelperOutput {
  int exit_code = -1;  // -1 when killed by a signal
  std::string out;
  std::string err;
};

// Runs `program` (an absolute path; argv[0] when empty) with argv, env, in
// cwd, stdin from /dev/null.
// Output beyond max_output bytes per stream (default 4 MiB) is an error (a
// helper that talks that much is not the tool we think it is). On timeout the
// child is SIGKILLed and reaped.
constexpr size_t kMaxHelperOutput = 4u << 20;
Result<HelperOutput> run_helper(const std::vector<std::string>& argv,
                                const std::vector<std::string>& env, const std::string& cwd,
                                std::chrono::milliseconds timeout = std::chrono::seconds(30),
                                const std::string& program = "",
                                size_t max_output = kMaxHelperOutput);

}  // namespace ccpool::compiler
