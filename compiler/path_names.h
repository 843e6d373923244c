// Path names as the models spell them (path_names.cpp): lexical joins and
// splits, and realpath(3).
#pragma once

#include <optional>
#include <string>

namespace ccpool::compiler {

std::string absolute_path(const std::string& path, const std::string& cwd);  // lexical
// The same without a copy: `path` itself when it is absolute, else `scratch`
// filled with it (for loops over hundreds of recorded paths per lookup).
const std::string& absolute_in(const std::string& path, const std::string& cwd,
                               std::string& scratch);
std::string base_name(const std::string& path);
std::optional<std::string> real_path(const std::string& path);  // realpath(3)

}  // namespace ccpool::compiler
