// One posix_spawn call with the pool's child setup: ProcessRunner's tools and
// the node pool's long-lived Python workers (workers/) start this way.
#pragma once

#include <sys/types.h>

#include "base/error.h"
#include "pool/process_runner.h"

namespace ccpool::pool::detail {

// A started child. Owns nothing: the caller takes the fds.
struct SpawnedChild {
  pid_t pid = -1;
  int pidfd = -1;      // pidfd_open(pid), O_CLOEXEC by default
  int stdout_fd = -1;  // read end, O_NONBLOCK | O_CLOEXEC; -1 with spec.output_fd
  int stderr_fd = -1;  // read end, O_NONBLOCK | O_CLOEXEC; -1 with spec.output_fd
};

// Starts spec.program in its own process group (pgid = pid) with stdin from
// /dev/null, stdout/stderr to fresh pipes (or spec.output_fd), spec.channel_fd
// as fd 3 when given, cwd = spec.cwd, env = spec.env, all signals at their
// default disposition and an empty signal mask, and every other fd >= 3
// closed. glibc's posix_spawn reports exec and chdir failures through its
// return value, so a returned child has already exec'd.
Result<SpawnedChild> spawn_child(const SpawnSpec& spec);

}  // namespace ccpool::pool::detail
