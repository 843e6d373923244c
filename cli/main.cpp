// The ccpool binary: a thin shell over the libraries. Each command group
// lives in its own cmd_*.cpp.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "base/process_facts.h"
#include "base/shim_env.h"
#include "cli/commands.h"
#include "client/client_main.h"
#include "service/service.h"

namespace ccpool::cli {

void fail(int code, const std::string& message) {
  std::fprintf(stderr, "ccpool: %s\n", message.c_str());
  throw CLI::RuntimeError(code);
}

FaultInjector& process_faults() {
  // Leaked on purpose: no static destructor in a long-lived process.
  static FaultInjector* faults = new FaultInjector(own_env("CCPOOL_FAULT").value_or(""));
  return *faults;
}

}  // namespace ccpool::cli

namespace {

// A service with the shim preloaded would redirect its own helper spawns
// (compiler probes) back into itself and wait forever. `serve` therefore
// re-execs itself without the shim before it starts any thread.
void reexec_serve_without_shim(char** argv) {
  std::optional<std::string> preload = ccpool::own_env("LD_PRELOAD");
  if (!preload) return;
  std::string kept = ccpool::strip_shim_from_preload(*preload);
  if (kept == *preload) return;
  if (kept.empty())
    ::unsetenv("LD_PRELOAD");
  else
    ::setenv("LD_PRELOAD", kept.c_str(), 1);
  ::execv("/proc/self/exe", argv);
  std::fprintf(stderr, "ccpool: cannot restart without the shim: %s\n", std::strerror(errno));
}

// "ccpool cache bogus" when argv names a command that does not exist at a
// level that needs one; empty when every command word is known.
std::string unknown_command(CLI::App& app, int argc, char** argv) {
  std::string path = "ccpool";
  CLI::App* level = &app;
  for (int i = 1; i < argc && level->get_require_subcommand_min() > 0; ++i) {
    if (argv[i][0] == '-') return {};
    CLI::App* next = nullptr;
    for (CLI::App* sub : level->get_subcommands({})) {
      if (sub->check_name(argv[i])) next = sub;
    }
    path += std::string(" ") + argv[i];
    if (next == nullptr) return path;
    level = next;
  }
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "serve") == 0) reexec_serve_without_shim(argv);
  if (argc >= 2 && std::strcmp(argv[1], "exec") == 0) {
    ccpool::client::ClientInvocation inv;
    if (ccpool::client::parse_exec_args(argc, argv, 2, inv)) return ccpool::client::run_client(inv);
  }
  CLI::App app{"ccpool: one bounded, deduplicating compile pool per node", "ccpool"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("ccpool ") + ccpool::service::kVersion);
  ccpool::cli::register_cache_commands(app);
  ccpool::cli::register_service_commands(app);
  ccpool::cli::register_launch_commands(app);
  ccpool::cli::register_explain_command(app);
  // CLI11 reports an unknown command as "A subcommand is required".
  if (std::string unknown = unknown_command(app, argc, argv); !unknown.empty()) {
    std::fprintf(stderr, "ccpool: unknown command '%s'; see '%s --help'\n", unknown.c_str(),
                 unknown.substr(0, unknown.rfind(' ')).c_str());
    return ccpool::cli::kExitUsage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : ccpool::cli::kExitUsage;
  }
  return 0;
}
