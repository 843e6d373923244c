// Test helper: run a program with an exact argv and environment, capturing
// stdout and stderr together. Header-only; shared by tests/shim and tests/launch.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace ccpool::testing {

struct ChildOutput {
  int exit_code = -1;  // exit status, or 128+N for signal N
  std::string output;  // stdout and stderr, interleaved
};

using EnvVars = std::map<std::string, std::string>;

inline std::vector<std::string> env_strings(const EnvVars& env) {
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

// Starts argv[0] (a path, no PATH search) with `env`; stdout/stderr go to
// `out_fd` when >= 0. `inherit_fd`, when >= 0, stays open in the child.
inline pid_t spawn_child(const std::vector<std::string>& argv, const EnvVars& env, int out_fd,
                         int inherit_fd = -1) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> strings = env_strings(env);
  std::vector<char*> envp;
  for (auto& e : strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (out_fd >= 0) {
    posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
    posix_spawn_file_actions_adddup2(&fa, out_fd, 2);
  }
  if (inherit_fd >= 0) posix_spawn_file_actions_adddup2(&fa, inherit_fd, inherit_fd);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

inline int wait_exit_code(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_text(const std::string& path, const std::string& text, mode_t mode = 0644) {
  { std::ofstream(path, std::ios::binary) << text; }
  ::chmod(path.c_str(), mode);
}

// Runs to completion; output captured through a file in `scratch`.
inline ChildOutput run_child(const std::vector<std::string>& argv, const EnvVars& env,
                             const std::string& scratch, int inherit_fd = -1) {
  std::string out_path = scratch + "/.child-output";
  int fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ChildOutput result;
  pid_t pid = spawn_child(argv, env, fd, inherit_fd);
  ::close(fd);
  if (pid < 0) return result;
  result.exit_code = wait_exit_code(pid);
  result.output = slurp(out_path);
  return result;
}

}  // namespace ccpool::testing
