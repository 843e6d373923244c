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

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "serve") == 0) reexec_serve_without_shim(argv);
  if (argc >= 2 && std::strcmp(argv[1], "exec") == 0) {
    ccpool::client::ClientInvocation inv;
    if (ccpool::client::parse_exec_args(argc, argv, 2, inv)) return ccpool::client::run_client(inv);
  }
  CLI::App app{ccpool::cli::kAppDescription, "ccpool"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("ccpool ") + ccpool::service::kVersion);
  ccpool::cli::register_cache_commands(app);
  ccpool::cli::register_service_commands(app);
  ccpool::cli::register_launch_commands(app);
  ccpool::cli::register_explain_command(app);
  return ccpool::cli::run_app(app, argc, argv);
}
