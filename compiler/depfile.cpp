#include "compiler/depfile.h"

#include <algorithm>
#include <cstdint>

namespace ccpool::compiler {

std::string depfile_spelling(std::string_view path) {
  while (path.size() > 2 && path[0] == '.' && path[1] == '/') {
    path.remove_prefix(2);
    while (!path.empty() && path[0] == '/') path.remove_prefix(1);
  }
  return std::string(path);
}

std::optional<std::vector<std::string>> parse_depfile(std::string_view text) {
  // Tokens of the first logical line; a backslash-newline continues it.
  std::vector<std::string> tokens;
  std::vector<bool> ends_rule;  // token was followed by an unescaped ':'
  std::string token;
  bool in_token = false;
  auto flush = [&](bool colon) {
    if (in_token) {
      tokens.push_back(token);
      ends_rule.push_back(colon);
    } else if (colon && !ends_rule.empty()) {
      ends_rule.back() = true;
    }
    token.clear();
    in_token = false;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\\' && i + 1 < text.size()) {
      char next = text[i + 1];
      if (next == '\n') {
        flush(false);
        ++i;
        continue;
      }
      if (next == '\r' && i + 2 < text.size() && text[i + 2] == '\n') {
        flush(false);
        i += 2;
        continue;
      }
      if (next == ' ' || next == '#' || next == '\\' || next == ':') {
        token += next;
        in_token = true;
        ++i;
        continue;
      }
      token += c;
      in_token = true;
    } else if (c == '$' && i + 1 < text.size() && text[i + 1] == '$') {
      token += '$';
      in_token = true;
      ++i;
    } else if (c == '\n') {
      flush(false);
      break;
    } else if (c == ' ' || c == '\t' || c == '\r') {
      flush(false);
    } else if (c == ':' && (i + 1 == text.size() || text[i + 1] == ' ' || text[i + 1] == '\t' ||
                            text[i + 1] == '\n' || text[i + 1] == '\r')) {
      flush(true);
    } else {
      token += c;
      in_token = true;
    }
  }
  flush(false);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (ends_rule[i]) return std::vector<std::string>(tokens.begin() + i + 1, tokens.end());
  }
  return std::nullopt;
}

}  // namespace ccpool::compiler
