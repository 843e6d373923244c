// Turning a request into tool inputs and stored outputs into requester files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"

namespace ccpool::service {

// Mode bits the tool itself would have produced under the caller's umask:
// compilers and linkers create files 0666 (0777 for executables and shared
// objects) masked by the umask.
uint32_t delivered_mode(uint32_t stored_mode, uint32_t umask);

// Fairness bucket for a request: the rank when known, else the client's parent
// process (the rank or worker that exec'd the compiler).
uint64_t fairness_id(int32_t rank, pid_t client_pid);

// One-line summary of an argv for status output.
std::string summarize_argv(const std::vector<std::string>& argv, size_t max_chars = 160);

}  // namespace ccpool::service
