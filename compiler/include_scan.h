// What the direct-mode manifest needs to know about one source or header,
// read from its text (docs/cache-keys.md):
// - which quote-include spellings it uses: only `#include "..."` (and
//   `#include_next "..."`, `#import "..."`) searches the including file's
//   directory, so only those spellings need includer-directory candidates;
// - which angle spellings it uses (gcc may replace the first include of the
//   main file by a precompiled NAME.gch found in any search directory);
// - its `__has_include` / `__has_include_next` probes, whose answers the
//   `.d` file does not record.
// The scan is textual and errs one way only: it may report spellings and
// probes that are not real (in comments or strings: extra lookups, harmless),
// but any include directive it cannot read (`#include MACRO`, a comment or
// trigraph inside the directive) makes the result opaque, and any probe whose
// argument is not a literal `<...>` or `"..."` sets probe_nonliteral.
#pragma once

#include <compare>
#include <set>
#include <string>
#include <string_view>

namespace ccpool::compiler {

struct HasIncludeProbe {
  bool angle = false;  // <name> rather than "name"
  bool next = false;   // __has_include_next
  std::string name;    // as written between the delimiters
  auto operator<=>(const HasIncludeProbe&) const = default;
};

struct IncludeScan {
  bool opaque = false;          // an include directive whose target the scan cannot see
  std::set<std::string> quote;  // "..." spellings, as written between the quotes
  std::set<std::string> angle;  // <...> spellings, as written between the brackets
  std::set<HasIncludeProbe> probes;
  bool probe_nonliteral = false;  // a __has_include whose argument is a macro or otherwise not literal
};

IncludeScan scan_includes(std::string_view text);

}  // namespace ccpool::compiler
