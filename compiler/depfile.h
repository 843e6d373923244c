// Make-syntax dependency files as gcc and clang write them (-MD -MF).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ccpool::compiler {

// The prerequisites of the first rule, unescaped ("\ " -> " ", "$$" -> "$",
// "\#" -> "#"), in file order. nullopt when the text has no rule.
std::optional<std::vector<std::string>> parse_depfile(std::string_view text);

// How gcc and clang spell a path in a dependency file: every leading "./"
// is dropped, with the slashes after it (`.//common/x.c` -> `common/x.c`,
// as zstd's Makefile spells its sources). Nothing else is normalised.
std::string depfile_spelling(std::string_view path);

// What the user asked the compiler for, when it differs from the full -MD
// file the run writes (the manifest needs every header, system ones too).
struct DepfileView {
  bool gcc_layout = true;        // gcc's wrapping (72 columns, one-space indent); else clang's
  bool user_only = false;        // -MMD / DEPENDENCIES_OUTPUT: no headers from system directories
  bool drop_main = false;        // SUNPRO_DEPENDENCIES: the main file is not listed
  bool phony = false;            // -MP: the run's file has the phony rules too
  std::vector<std::string> system_dirs;  // as the compiler spells paths; a dep under one is a system header
};

// The file the compiler would have written for `view`, derived from the full
// file `full` of the same compile (run with -MD and the same -MT/-MQ/-MP).
// nullopt when `full` is not exactly what this model writes for its own
// dependency list (then the derivation cannot be trusted byte for byte).
// Exact for gcc and clang except where a header in a non-system directory
// was only reached from a system header (or after `#pragma GCC
// system_header`): the compiler then treats it as a system header too, and
// the derived file lists it as an extra prerequisite (a superset, never less).
std::optional<std::string> derive_depfile(std::string_view full, const DepfileView& view);

}  // namespace ccpool::compiler
