// Running the tool locally when the service cannot: a node-wide N-slot lock
// bounds how many fallbacks run at once, each fallback is logged, and the
// tool is exec'd in place of the client.
//
// Slot lock (mold's jobs-unix.cc pattern): N files `<state dir>/slot.<i>`.
// The client takes the first one it can flock(LOCK_EX|LOCK_NB); when all are
// held it blocks on slot hash(pid) % N. The lock fd is deliberately NOT
// close-on-exec: the exec'd compiler (and its children) inherit it, so the
// slot stays held until the last of them exits, with no process of ours left.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ccpool::client {

// CCPOOL_JOBS when the jobs grammar (base/process_facts.h) accepts it and it is
// at most kMaxFallbackSlots (slot files), else available_cpus(). Never an
// error: a client that cannot reach the service must still compile; the
// service and `ccpool run` refuse a malformed value with its fix.
inline constexpr int kMaxFallbackSlots = 4096;
int fallback_slot_count(const std::vector<std::string>& env);

// Takes one of `slots` slot locks under `state_dir`; returns its fd (left
// open and inheritable) or -1 when the slot files cannot be opened, in which
// case the fallback runs unbounded rather than fail the build.
int acquire_fallback_slot(const std::string& state_dir, int slots);

// Appends "<unix seconds>\t<pid>\t<reason>\t<program>\n" to
// <state_dir>/fallbacks.log with one O_APPEND write (lines from concurrent
// clients never interleave). The service reports the line count.
void log_fallback(const std::string& state_dir, std::string_view reason,
                  const std::string& program);

// execve(program, argv, env); returns only on failure, with the shell's
// convention (127 not found, 126 not executable) after printing why.
int exec_program(const std::string& program, const std::vector<std::string>& argv,
                 const std::vector<std::string>& env);

// The whole fallback: log, take a slot, exec with the environment minus the
// shim and with CCPOOL_DISABLE=1. Returns only when the exec fails. An empty
// `state_dir` (one we must not trust) skips the log and the slot.
int run_fallback(const std::string& state_dir, std::string_view reason, const std::string& program,
                 const std::vector<std::string>& argv, const std::vector<std::string>& env);

}  // namespace ccpool::client
