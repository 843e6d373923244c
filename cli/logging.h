// Logging of `ccpool serve`: the rotating ccpool.log in the state directory,
// plus stderr in the foreground, or "<N>"-prefixed lines when stderr is the
// systemd journal (JOURNAL_STREAM), so the journal records each priority.
#pragma once

#include <string>

namespace ccpool::cli {

void setup_serve_logging(const std::string& state_dir, bool foreground);

// syslog priority of an spdlog level (trace/debug 7, info 6, warn 4, error 3, critical 2).
int journal_priority(int spdlog_level);

}  // namespace ccpool::cli
