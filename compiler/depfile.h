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

}  // namespace ccpool::compiler
