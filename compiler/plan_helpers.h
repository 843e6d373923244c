// Helpers the models' plan() and finish() use (planner.cpp): the pass-through
// plan, the command as given, the traced environment, and the clock in the nanoseconds file stats
// carry.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "compiler/planner.h"

namespace ccpool::compiler {

// Runs the command as given, uncached; `code` is a reason_code() spelling.
Plan passthrough_plan(const Request& request, std::string code, std::string reason);

// The command as the requester gave it (program, argv, cwd, environment
// without the shim), named after the program: the pass-through plan's run and
// a generic job's.
void run_as_given(Plan& plan, const Request& request);

// The requester's environment without the shim and any CCPOOL_TRACE, with the
// recorder (`trace_library`, appending to `trace_path`) preloaded before
// anything the requester preloads: how every recorded compile runs.
std::vector<std::string> traced_environment(const Request& request,
                                            const std::string& trace_library,
                                            const std::string& trace_path);

int64_t to_ns(std::chrono::system_clock::time_point t);

}  // namespace ccpool::compiler
