// systemd integration, written by hand (ARCHITECTURE.md says why): socket
// activation (sd_listen_fds(3): LISTEN_PID, LISTEN_FDS, descriptors from 3)
// and the journal's stream protocol (JOURNAL_STREAM, "<N>" priority prefixes).
#pragma once

#include <string>

#include "base/error.h"
#include "base/fs.h"

namespace ccpool::service {

// The listening socket systemd passed to this process, made non-blocking and
// close-on-exec, with LISTEN_* removed from the environment so no child sees
// them. Empty when the process was not socket-activated (no LISTEN_PID, or one
// naming another process). Errors (kInvalidArgument) when the passed
// descriptors are not exactly one listening Unix stream socket bound to
// `socket_path`, naming what was passed and the fix.
Result<UniqueFd> take_activation_socket(const std::string& socket_path);

// True when stderr is the journal's stream (JOURNAL_STREAM names its device
// and inode), so log lines should carry "<N>" syslog priorities.
bool stderr_is_journal();

}  // namespace ccpool::service
