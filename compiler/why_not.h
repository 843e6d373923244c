// Why a result is not cached: a stable code (docs/cache-keys.md) and text
// for humans. The bottom of compiler/: includes nothing of its own.
#pragma once

#include <string>

namespace ccpool::compiler {

struct WhyNot {
  std::string code, text;
  bool empty() const { return code.empty(); }
};

}  // namespace ccpool::compiler
