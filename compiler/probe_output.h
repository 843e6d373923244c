// Parsers of what gcc/clang print about themselves (cc_probe.cpp runs them):
// pure functions of the text, so they are unit-tested and fuzzed on their own.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ccpool::compiler {

// The include search order of `-E -v` (stderr), directories as printed with
// trailing slashes removed and " (framework directory)" cut off.
struct SearchList {
  std::vector<std::string> quote;    // after `#include "..." search starts here:`
  std::vector<std::string> bracket;  // after `#include <...> search starts here:`
  std::vector<std::string> missing;  // `ignoring nonexistent directory "..."`
};
// nullopt when the text has no "End of search list." line.
std::optional<SearchList> parse_search_list(std::string_view text);

// Splits one `-###` command line: tokens separated by spaces or tabs,
// "double quoted" ones with backslash escapes.
std::vector<std::string> split_command_line(std::string_view line);

// The words of the last command line `-###` printed (lines that start with a
// space); empty when there is none.
std::vector<std::string> last_command_words(std::string_view text);

}  // namespace ccpool::compiler
