// Turning a request into tool inputs and stored outputs into requester files.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace ccpool::service {

// Mode bits the tool itself would have produced under the caller's umask:
// compilers and linkers create files 0666 (0777 for executables and shared
// objects) masked by the umask.
uint32_t delivered_mode(uint32_t stored_mode, uint32_t umask);

// Writes one output at `path` the way the tool itself would have left it:
//  - a symlink is written through: its final target gets the bytes and the
//    link stays a link (a dangling link's target is created);
//  - an existing file that is not a regular file (a character device such as
//    /dev/null, a FIFO with a reader) is written to in place, never replaced,
//    and its mode is never changed;
//  - a regular file already holding exactly `bytes` only gets `mode` and a
//    fresh mtime (build tools compare mtimes; a rename over it costs ms on ext4);
//  - otherwise a temp file beside the target, with `mode`, is renamed over it,
//    so no reader ever sees a partial object.
Result<void> write_output(const std::string& path, std::string_view bytes, uint32_t mode);

// Fairness bucket for a request: the rank when known, else the client's parent
// process (the rank or worker that exec'd the compiler).
uint64_t fairness_id(int32_t rank, pid_t client_pid);

// One-line summary of an argv for status output.
std::string summarize_argv(const std::vector<std::string>& argv, size_t max_chars = 160);

}  // namespace ccpool::service
