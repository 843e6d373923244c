// Removing the ccpool shim from an environment. Everything ccpool starts
// itself (the pool's tools, helper probes, the service, fallback compiles)
// must run without libccpool-shim.so, or it would be redirected back into
// ccpool: a bounded pool that waits on its own children deadlocks.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ccpool {

inline constexpr std::string_view kShimName = "libccpool-shim.so";

// The LD_PRELOAD value with every entry naming libccpool-shim.so removed.
// Entries are separated by ':' or ' ' (ld.so accepts both); the others are
// kept in order, joined by ':'.
std::string strip_shim_from_preload(std::string_view value);

// `env` ("NAME=value" entries) with the shim removed from LD_PRELOAD; an
// LD_PRELOAD left empty is dropped altogether.
std::vector<std::string> environment_without_shim(const std::vector<std::string>& env);

}  // namespace ccpool
