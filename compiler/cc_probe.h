// What gcc/clang report about themselves for one command line, memoized:
// the -march=native expansion (`-###`). Everything else a compile reads is
// recorded while it runs (compiler/observed.h).
#pragma once

#include <string>
#include <vector>

#include "compiler/cc_args.h"
#include "compiler/planner.h"
#include "compiler/tool_identity.h"

namespace ccpool::compiler {

struct ProbeContext {
  Planner::Impl& impl;
  const Request& request;
  const ToolIdentity& tool;
  const CcArgs& args;
};

// The concrete target flags -march/-mtune/-mcpu=native stand for on this
// machine (the compiler's whole `-###` answer).
Result<std::string> probe_native(const ProbeContext& ctx);

// LC_ALL=C so the helper's output parses, shim removed, the rest as the caller.
std::vector<std::string> helper_env(const std::vector<std::string>& env);

}  // namespace ccpool::compiler
