// Kept apart from planner.cpp so the argument-parser fuzz target links it alone.
#include "compiler/reason_code.h"

namespace ccpool::compiler {

std::string reason_code(std::string_view code, std::string_view detail) {
  constexpr size_t kMaxDetail = 48;
  std::string out(code);
  out += ':';
  for (size_t i = 0; i < detail.size() && i < kMaxDetail; ++i) {
    char c = detail[i];
    out += (c > ' ' && c < 127) ? c : '?';
  }
  return out;
}

}  // namespace ccpool::compiler
