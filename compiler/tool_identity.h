// A tool binary as keys name it (Planner::Impl::tool_identity, planner.cpp):
// its real path and content, and the driver family `--version` reports.
#pragma once

#include <string>

#include "base/hash.h"
#include "compiler/file_hasher.h"

namespace ccpool::compiler {

enum class Family { kUnknown, kGcc, kClang };

struct ToolIdentity {
  std::string real_path;
  Digest content;
  FileStat stat;
  Digest key;  // H(real_path, content)
};

}  // namespace ccpool::compiler
