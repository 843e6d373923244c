// Path names as the models spell them (path_names.cpp): lexical joins and
// splits, and realpath(3).
#pragma once

#include <optional>
#include <string>

namespace ccpool::compiler {

std::string absolute_path(const std::string& path, const std::string& cwd);  // lexical
std::string base_name(const std::string& path);
std::optional<std::string> real_path(const std::string& path);  // realpath(3)

}  // namespace ccpool::compiler
