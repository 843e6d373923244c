// Helpers the models' plan() and finish() use (planner.cpp): the pass-through
// plan and the clock in the nanoseconds file stats carry.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "compiler/planner.h"

namespace ccpool::compiler {

// Runs the command as given, uncached; `code` is a reason_code() spelling.
Plan passthrough_plan(const Request& request, std::string code, std::string reason);

int64_t to_ns(std::chrono::system_clock::time_point t);

}  // namespace ccpool::compiler
