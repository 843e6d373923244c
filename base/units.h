// Parsing and printing of sizes ("10GiB", "512M") and durations ("1h", "250ms").
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/error.h"

namespace ccpool {

// Accepts a plain byte count or a number with K/M/G/T (powers of 1024, with or
// without "i"/"B": 10G, 10GB, 10GiB all mean 10 * 2^30).
Result<uint64_t> parse_size(std::string_view text);

// Accepts a number with ms, s, m, h or d ("90s", "1h", "250ms"); bare numbers are seconds.
Result<std::chrono::milliseconds> parse_duration(std::string_view text);

std::string format_size(uint64_t bytes);                 // "1.5 GiB"
std::string format_duration(std::chrono::milliseconds);  // "1h 2m", "350 ms"

}  // namespace ccpool
