// Which quote-include spellings a source or header uses, for the direct-mode
// negative-path rule: only `#include "..."` (and `#include_next "..."`,
// `#import "..."`) searches the including file's directory, so only those
// spellings need includer-directory candidates (docs/cache-keys.md).
// The scan is textual and errs one way only: it may report spellings that
// are not includes (in comments or strings: extra negatives, harmless), but
// any directive it cannot read (`#include MACRO`, a comment or trigraph
// inside the directive) makes the result opaque, and the caller then falls
// back to treating every header name as a possible quote include.
#pragma once

#include <set>
#include <string>
#include <string_view>

namespace ccpool::compiler {

struct IncludeScan {
  bool opaque = false;          // an include directive whose target the scan cannot see
  std::set<std::string> quote;  // "..." spellings, as written between the quotes
};

IncludeScan scan_includes(std::string_view text);

}  // namespace ccpool::compiler
