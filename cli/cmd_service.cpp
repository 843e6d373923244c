// Placeholder until this command group lands.
#include "cli/commands.h"

namespace ccpool::cli {
void register_service_commands(CLI::App&) {}
}  // namespace ccpool::cli
