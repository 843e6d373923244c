#include "client/request.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "base/process.h"
#include "base/process_facts.h"

extern char** environ;

namespace ccpool::client {

void set_env_entry(std::vector<std::string>& env, std::string_view name, std::string_view value) {
  std::string entry = std::string(name) + "=" + std::string(value);
  for (std::string& e : env) {
    if (e.size() > name.size() && e[name.size()] == '=' && e.compare(0, name.size(), name) == 0) {
      e = std::move(entry);
      return;
    }
  }
  env.push_back(std::move(entry));
}

std::vector<std::string> current_environment() {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  return env;
}

const std::string* find_env(const std::vector<std::string>& env, std::string_view name) {
  for (const std::string& e : env) {
    if (e.size() > name.size() && e[name.size()] == '=' && e.compare(0, name.size(), name) == 0)
      return &e;
  }
  return nullptr;
}

int32_t rank_from_env(const std::vector<std::string>& env) {
  for (std::string_view name : {"RANK", "LOCAL_RANK"}) {
    const std::string* entry = find_env(env, name);
    if (!entry) continue;
    const char* text = entry->c_str() + name.size() + 1;
    char* end = nullptr;
    errno = 0;
    long value = std::strtol(text, &end, 10);
    if (*text != '\0' && *end == '\0' && errno == 0 && value >= 0 && value <= INT32_MAX) {
      return static_cast<int32_t>(value);
    }
  }
  return -1;
}

Result<std::string> resolve_program(const std::string& program, const std::string& cwd,
                                    const std::vector<std::string>& env) {
  if (program.empty()) return make_error(ErrorCode::kInvalidArgument, "empty program name");
  if (program.find('/') != std::string::npos) {
    if (program[0] == '/') return program;
    return cwd + "/" + program;
  }
  std::string found =
      search_path(program, env_value(env, "PATH").value_or(std::string(kDefaultSearchPath)), cwd);
  if (!found.empty()) return found;
  return make_error(ErrorCode::kNotFound,
                    "'" + program + "' not found in PATH; give its full path");
}

Result<ipc::ExecRequest> build_request(const std::string& program,
                                       const std::vector<std::string>& argv,
                                       const std::vector<std::string>& inputs,
                                       const std::vector<std::string>& outputs) {
  ipc::ExecRequest r;
  char cwd[PATH_MAX];
  if (::getcwd(cwd, sizeof cwd) == nullptr) {
    return make_error(ErrorCode::kIo, std::string("getcwd failed: ") + std::strerror(errno));
  }
  r.cwd = cwd;
  r.program = program;
  r.argv = argv;
  r.env = environment_without_shim(current_environment());
  r.client_pid = static_cast<int32_t>(::getpid());
  r.rank = rank_from_env(r.env);
  mode_t old = ::umask(0);
  ::umask(old);
  r.umask = static_cast<uint32_t>(old);
  r.inputs = inputs;
  r.outputs = outputs;
  return r;
}

}  // namespace ccpool::client
