// Process helpers shared by client/, compiler/, launch/ and service/: the PATH
// search, parent pids from /proc, and argv/envp arrays for exec and spawn.
// (The shim keeps its own C copy of the PATH search: it may not allocate.)
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

namespace ccpool {

// The search path when the environment has no PATH: glibc's confstr(_CS_PATH),
// which is what execvp and posix_spawnp use.
inline constexpr std::string_view kDefaultSearchPath = "/bin:/usr/bin";

// execvp's search for `name` (which holds no '/') in the colon-separated
// `path`: the first entry holding an executable regular file wins; an empty
// entry means `cwd`. Returns "" when none does. `first_existing`, when given,
// receives the first candidate that exists but is not executable, so a caller
// can report EACCES as execvp would.
std::string search_path(std::string_view name, std::string_view path, const std::string& cwd,
                        std::string* first_existing = nullptr);

// The parent pid of `pid` from /proc/<pid>/stat; -1 when it is gone or the
// file cannot be parsed.
pid_t parent_pid(pid_t pid);

// A NULL-terminated array of pointers into `strings`, for execve and
// posix_spawn. `strings` must outlive the array and stay unchanged.
std::vector<char*> c_string_array(const std::vector<std::string>& strings);

}  // namespace ccpool
