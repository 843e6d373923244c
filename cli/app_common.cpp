// What every ccpool command shares, in both binaries that parse commands:
// ccpool-cli (all of them) and the static front door (`run`, `env`).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/process_facts.h"
#include "cli/commands.h"

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

namespace {

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

int run_app(CLI::App& app, int argc, char** argv) {
  // CLI11 reports an unknown command as "A subcommand is required".
  if (std::string unknown = unknown_command(app, argc, argv); !unknown.empty()) {
    std::fprintf(stderr, "ccpool: unknown command '%s'; see '%s --help'\n", unknown.c_str(),
                 unknown.substr(0, unknown.rfind(' ')).c_str());
    return kExitUsage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : kExitUsage;
  }
  return 0;
}

}  // namespace ccpool::cli
