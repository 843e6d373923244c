// Placeholder until this command group lands.
#include "cli/commands.h"

namespace ccpool::cli {
void register_launch_commands(CLI::App&) {}
}  // namespace ccpool::cli
