// Each command group registers its CLI11 subcommands here. Subcommand
// callbacks report their exit code by throwing CLI::RuntimeError(code):
// 0 OK, 1 operational error, 2 usage error.
#pragma once

#include <CLI/CLI.hpp>

#include "base/fault.h"

namespace ccpool::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = 2;

void register_cache_commands(CLI::App& app);    // ccpool cache ...
void register_service_commands(CLI::App& app);  // serve, status, stop, exec
void register_launch_commands(CLI::App& app);   // run, env
void register_explain_command(CLI::App& app);   // explain

// The top-level description, shared by ccpool-cli and the static front door
// (cli/dispatch.cpp), which serves `run` and `env` with the same commands.
inline constexpr const char* kAppDescription =
    "ccpool: one bounded, deduplicating compile pool per node";

// Parses argv with `app` (its commands registered) and runs the chosen
// command; returns the exit code. An unknown command word is a usage error
// naming it. Implemented in cli/app_common.cpp.
int run_app(CLI::App& app, int argc, char** argv);

// Prints "ccpool: <message>" to stderr and throws CLI::RuntimeError(code).
[[noreturn]] void fail(int code, const std::string& message);

// This process's fault injector, from CCPOOL_FAULT (tests only; base/fault.h),
// read on first use. The commands hand it to the store and the service; the
// libraries never read the variable themselves.
FaultInjector& process_faults();

}  // namespace ccpool::cli
