// The ccpool binary: a thin shell over the libraries. Each command group
// lives in its own cmd_*.cpp.
#include <cstdio>

#include "cli/commands.h"

namespace ccpool::cli {

void fail(int code, const std::string& message) {
  std::fprintf(stderr, "ccpool: %s\n", message.c_str());
  throw CLI::RuntimeError(code);
}

}  // namespace ccpool::cli

int main(int argc, char** argv) {
  CLI::App app{"ccpool: one bounded, deduplicating compile pool per node", "ccpool"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "ccpool 0.1.0");
  ccpool::cli::register_cache_commands(app);
  ccpool::cli::register_service_commands(app);
  ccpool::cli::register_launch_commands(app);
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
