#include "base/paths.h"

#include <sys/stat.h>
#include <unistd.h>

#include "base/process_facts.h"

namespace ccpool {
namespace {

std::string env_or_empty(const char* name) {
  return own_env(name).value_or("");
}

}  // namespace

std::string default_store_dir(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (auto env = env_or_empty("CCPOOL_DIR"); !env.empty()) return env;
  if (auto xdg = env_or_empty("XDG_CACHE_HOME"); !xdg.empty()) return xdg + "/ccpool";
  if (auto home = env_or_empty("HOME"); !home.empty()) return home + "/.cache/ccpool";
  return "/tmp/ccpool-cache-" + std::to_string(::getuid());
}

std::string default_socket_path(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (auto env = env_or_empty("CCPOOL_SOCKET"); !env.empty()) return env;
  if (auto xdg = env_or_empty("XDG_RUNTIME_DIR"); !xdg.empty()) return xdg + "/ccpool/sock";
  // systemd's runtime directory, for environments that lost XDG_RUNTIME_DIR
  // (env -i, cron, subprocess env={...}): only when it is really ours.
  std::string run_user = "/run/user/" + std::to_string(::getuid());
  struct stat st;
  if (::lstat(run_user.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::geteuid() &&
      (st.st_mode & 077) == 0) {
    return run_user + "/ccpool/sock";
  }
  // Anyone can create this directory first: clients and the service check
  // who owns it before they use it (check_socket_dir, ensure_private_dir).
  return "/tmp/ccpool-" + std::to_string(::getuid()) + "/sock";
}

std::string state_dir_for_socket(const std::string& socket_path) {
  auto slash = socket_path.rfind('/');
  std::string dir = slash == std::string::npos ? "."
                    : slash == 0               ? "/"
                                               : socket_path.substr(0, slash);
  std::string name = slash == std::string::npos ? socket_path : socket_path.substr(slash + 1);
  if (name == kDefaultSocketName) return dir;
  return (dir == "/" ? "" : dir) + "/" + name + ".d";
}

}  // namespace ccpool
