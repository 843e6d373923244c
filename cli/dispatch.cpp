// `ccpool`: a small, statically linked front door. `ccpool exec` is on the
// hot path of every redirected compile, so it is served here with only the
// client library loaded (no dynamic loader work, no CLI11 set-up); every other
// command, and any `exec` form this parser does not recognise (--help, a bad
// option), is handed to the full CLI, `ccpool-cli`, next to this binary.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "base/process_facts.h"
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
  std::string cli = self_dir() + "/ccpool-cli";
  ::execv(cli.c_str(), argv);
  std::fprintf(stderr, "ccpool: cannot run '%s': %s; reinstall ccpool (it belongs next to %s)\n",
               cli.c_str(), std::strerror(errno), argv[0]);
  return 1;
}
