// `ccpool`: a small, statically linked front door. `ccpool exec` is on the
// hot path of every redirected compile, so it is served here with only the
// client library loaded (no dynamic loader work, no CLI11 set-up). `ccpool
// run` and `ccpool env` start every wrapped build and every rank, so they are
// served here too, by the same command code as in ccpool-cli (cmd_launch.cpp:
// the launch and client libraries, CLI11, no service, store or oneTBB). Every
// other command, and any `exec` form the exec parser does not recognise
// (--help, a bad option), is handed to the full CLI, `ccpool-cli`, next to
// this binary.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "base/process_facts.h"
#include "cli/commands.h"
#include "client/client_main.h"

namespace {

std::string self_dir() {
  std::string dir = ccpool::own_executable_dir();
  return dir.empty() ? "." : dir;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "exec") == 0) {
    ccpool::client::ClientInvocation inv;
    if (ccpool::client::parse_exec_args(argc, argv, 2, inv)) return ccpool::client::run_client(inv);
  }
  if (argc >= 2 && (std::strcmp(argv[1], "run") == 0 || std::strcmp(argv[1], "env") == 0)) {
    CLI::App app{ccpool::cli::kAppDescription, "ccpool"};
    app.require_subcommand(1);
    ccpool::cli::register_launch_commands(app);
    return ccpool::cli::run_app(app, argc, argv);
  }
  std::string cli = self_dir() + "/ccpool-cli";
  ::execv(cli.c_str(), argv);
  std::fprintf(stderr, "ccpool: cannot run '%s': %s; reinstall ccpool (it belongs next to %s)\n",
               cli.c_str(), std::strerror(errno), argv[0]);
  return 1;
}
