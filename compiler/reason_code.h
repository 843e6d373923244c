// Stable reason codes (docs/cache-keys.md, "Why-not reason codes"): the
// bottom of compiler/, included by the argument parsers and the models.
#pragma once

#include <string>
#include <string_view>

namespace ccpool::compiler {

// "code:detail" with detail cut to a bounded, printable, space-free token
// (detail comes from the command line: the counters keyed by codes must not
// grow without bound or carry arbitrary bytes).
std::string reason_code(std::string_view code, std::string_view detail);

}  // namespace ccpool::compiler
