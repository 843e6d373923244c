// Facts about the running process that several layers read: its environment,
// its own executable, the CPUs it may use, and the one grammar of the jobs
// setting (`--jobs` / CCPOOL_JOBS). Read them here, never by hand: four
// readers of CCPOOL_JOBS used to disagree about "8x".
// (The shim and the recorder keep their own C: they may not link base/.)
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace ccpool {

// The value of `name` in an environment of "NAME=value" strings (execve's
// layout); nullopt when unset. The one lookup of a request's environment
// (client, compiler models): copied, so it outlives `env`.
std::optional<std::string> env_value(const std::vector<std::string>& env, std::string_view name);

// This process's own variable `name`; nullopt when unset. Copied, so a later
// setenv cannot invalidate it.
std::optional<std::string> own_env(const char* name);

// Absolute path of the running executable (/proc/self/exe); "" when /proc
// cannot tell (not mounted). Callers choose their own fallback.
std::string own_executable();

// The directory of own_executable(); "" when that is unknown.
std::string own_executable_dir();

// CPUs this process may run on: its affinity mask, else the online CPUs,
// at least 1.
int available_cpus();

// The jobs grammar: decimal digits only, 1 to kMaxJobs ("8x", " 8", "+8" and
// "0" are refused). `origin` names where `text` came from, "--jobs" or
// "CCPOOL_JOBS"; the message quotes the value and says how to fix it.
inline constexpr int kMaxJobs = 1'000'000;
Result<int> parse_jobs(std::string_view text, std::string_view origin);

// The jobs setting: the flag when given (non-empty), else CCPOOL_JOBS when
// non-empty (the variable is then not read), else 0: the caller's default,
// available_cpus().
Result<int> jobs_setting(std::string_view flag, std::string_view ccpool_jobs);

}  // namespace ccpool
