#include "compiler/path_names.h"

#include <climits>
#include <cstdlib>

namespace ccpool::compiler {

std::string base_name(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string absolute_path(const std::string& path, const std::string& cwd) {
  std::string scratch;
  return absolute_in(path, cwd, scratch);
}

const std::string& absolute_in(const std::string& path, const std::string& cwd,
                               std::string& scratch) {
  if (!path.empty() && path[0] == '/') return path;
  scratch.assign(cwd);
  if (!cwd.empty() && cwd.back() != '/') scratch += '/';
  scratch += path;
  return scratch;
}

std::optional<std::string> real_path(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) return std::nullopt;
  return std::string(buf);
}

}  // namespace ccpool::compiler
