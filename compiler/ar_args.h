// GNU ar and ranlib command lines, and the archives they write: which runs
// make one archive from files the record can see (ar_model.cpp keys them),
// and whether an archive is deterministic. Pure functions of their input,
// unit-tested on their own. Anything not understood is refused
// (pass-through), see docs/cache-keys.md, "Static archives".
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ccpool::compiler {

struct ArArgs {
  std::string refused;          // non-empty: pass-through, with the reason (for humans)
  std::string refused_code;     // the stable reason code when refused
  size_t archive_index = 0;     // argv index of the archive operand
  bool create_quietly = false;  // ar's `c` (ranlib: never creates)
};

// argv[0] is ar: `ar [-]OP[MODS] ARCHIVE [MEMBER...]` where OP is `q` or `r`
// and the modifiers are among `c`, `s`, `S`, `D` and `v`, in any order
// (libtool writes `cr`, CMake `qc`, GNU make's default ARFLAGS is `rv`). Members and the archive
// are plain operands: no option, no @file, the archive not among its members.
ArArgs parse_ar_args(const std::vector<std::string>& argv);

// argv[0] is ranlib: `ranlib [-D] ARCHIVE`, one archive.
ArArgs parse_ranlib_args(const std::vector<std::string>& argv);

// "" when `bytes` is a regular (not thin) ar archive whose every header is
// what GNU ar's D mode writes (date 0, uid 0, gid 0, mode 644 for members
// and 0 for the symbol table; the long-name table's fields blank), else why
// not. An archive stamped with the clock, the user's ids or the files' modes
// is what a later run would write differently, so it is never stored.
std::string archive_not_deterministic(std::string_view bytes);

}  // namespace ccpool::compiler
