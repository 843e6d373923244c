// What gcc/clang report about themselves for one command line, memoized:
// the include search order (`-E -v`), the -march=native expansion (`-###`),
// and the files a one-step link reads (`-###` link line, -l resolution).
#pragma once

#include <string>
#include <vector>

#include "compiler/cc_args.h"
#include "compiler/planner_impl.h"

namespace ccpool::compiler {

struct ProbeContext {
  Planner::Impl& impl;
  const Request& request;
  const ToolIdentity& tool;
  const CcArgs& args;
};

// Include search order for this command (strings as the compiler forms
// paths). Directories the compiler reported as nonexistent are put first in
// `bracket`: their real position is unknown and earlier only adds negatives.
Result<SearchDirs> probe_search_dirs(const ProbeContext& ctx);

// The concrete target flags -march/-mtune/-mcpu=native stand for on this
// machine (the compiler's whole `-###` answer).
Result<std::string> probe_native(const ProbeContext& ctx);

// Every file a one-step link reads besides the source: linker binaries, crt
// objects, plugins, and each -l library as the linker would find it (every
// candidate up to the first directory that has one; linker scripts followed
// one level). Hashed into `h`; each file is appended to `checked`.
Result<void> hash_link_inputs(const ProbeContext& ctx, Hasher& h, std::vector<CheckedInput>& checked,
                              std::vector<std::pair<std::string, FileStat>>& tools);

// LC_ALL=C so the helper's output parses, shim removed, the rest as the caller.
std::vector<std::string> helper_env(const std::vector<std::string>& env);

}  // namespace ccpool::compiler
