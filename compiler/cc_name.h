// Which tool names are C/C++ compiler drivers: gcc, g++, cc, c++, clang and
// clang++, optionally behind a target triplet and/or a version suffix
// (x86_64-linux-gnu-gcc-12, clang++-14, g++-12.2). Exactly the language of
//   ^([A-Za-z0-9_.]+-)*(gcc|g\+\+|cc|c\+\+|clang|clang\+\+)(-[0-9]+(\.[0-9]+)*)?$
// matched by hand, as shim/match.c does: no allocation, no recursion, linear
// in the length of the name (std::regex recursed once per character, and a
// 20,000-character argv[0] overflowed a worker's stack).
#pragma once

#include <string_view>

namespace ccpool::compiler {

bool is_cc_name(std::string_view name);

}  // namespace ccpool::compiler
