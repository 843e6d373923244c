#include "client/fallback.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "base/fs.h"
#include "base/process.h"
#include "base/process_facts.h"
#include "client/request.h"

namespace ccpool::client {
namespace {

int open_slot(const std::string& state_dir, int i) {
  std::string path = state_dir + "/slot." + std::to_string(i);
  // No O_CLOEXEC: the exec'd tool must inherit the lock (see fallback.h).
  return ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW, 0600);
}

// A slot index spread by pid so blocked clients queue on different files.
int slot_for_pid(int slots) {
  uint32_t x = static_cast<uint32_t>(::getpid()) * 2654435761u;
  return static_cast<int>((x >> 16) % static_cast<uint32_t>(slots));
}

std::string one_line(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c == '\n' || c == '\t' || c == '\r') c = ' ';
  }
  return out;
}

}  // namespace

int fallback_slot_count(const std::vector<std::string>& env) {
  Result<int> jobs = jobs_setting("", env_value(env, "CCPOOL_JOBS").value_or(""));
  if (jobs && *jobs > 0 && *jobs <= kMaxFallbackSlots) return *jobs;
  return available_cpus();
}

int acquire_fallback_slot(const std::string& state_dir, int slots) {
  if (slots < 1) slots = 1;
  if (!ensure_private_dir(state_dir)) return -1;
  int first = slot_for_pid(slots);
  for (int k = 0; k < slots; ++k) {
    int i = (first + k) % slots;
    int fd = open_slot(state_dir, i);
    if (fd < 0) return -1;
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
    ::close(fd);
  }
  int fd = open_slot(state_dir, first);
  if (fd < 0) return -1;
  while (::flock(fd, LOCK_EX) != 0) {
    if (errno != EINTR) {
      ::close(fd);
      return -1;
    }
  }
  return fd;
}

void log_fallback(const std::string& state_dir, std::string_view reason,
                  const std::string& program) {
  if (!ensure_private_dir(state_dir)) return;
  std::string path = state_dir + "/fallbacks.log";
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return;
  std::string line = std::to_string(static_cast<long long>(std::time(nullptr))) + "\t" +
                     std::to_string(::getpid()) + "\t" + one_line(reason) + "\t" +
                     one_line(program) + "\n";
  ssize_t ignored = ::write(fd, line.data(), line.size());
  (void)ignored;
  ::close(fd);
}

int exec_program(const std::string& program, const std::vector<std::string>& argv,
                 const std::vector<std::string>& env) {
  std::vector<std::string> program_only;  // an empty argv gets the program as its argv[0]
  if (argv.empty()) program_only.push_back(program);
  std::vector<char*> args = c_string_array(argv.empty() ? program_only : argv);
  std::vector<char*> envp = c_string_array(env);
  ::execve(program.c_str(), args.data(), envp.data());
  int err = errno;
  std::string message =
      "ccpool-client: cannot execute '" + program + "': " + std::strerror(err) + "\n";
  ssize_t ignored = ::write(2, message.data(), message.size());
  (void)ignored;
  return err == ENOENT || err == ENOTDIR ? 127 : 126;
}

int run_fallback(const std::string& state_dir, std::string_view reason, const std::string& program,
                 const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  if (!state_dir.empty()) log_fallback(state_dir, reason, program);
  std::vector<std::string> child_env = environment_without_shim(env);
  set_env_entry(child_env, "CCPOOL_DISABLE", "1");
  int slot = state_dir.empty() ? -1 : acquire_fallback_slot(state_dir, fallback_slot_count(env));
  int code = exec_program(program, argv, child_env);
  if (slot >= 0) ::close(slot);
  return code;
}

}  // namespace ccpool::client
