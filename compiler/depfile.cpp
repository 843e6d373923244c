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
      if (next == '\n') { flush(false); ++i; continue; }
      if (next == '\r' && i + 2 < text.size() && text[i + 2] == '\n') { flush(false); i += 2; continue; }
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

namespace ccpool::compiler {
namespace {

// Tokens of a rule's text exactly as written (escapes kept), the main rule
// only; *rest receives everything after its terminating newline.
std::vector<std::string> raw_tokens(std::string_view text, std::string_view* rest) {
  std::vector<std::string> tokens;
  std::string token;
  size_t i = 0;
  auto flush = [&] {
    if (!token.empty()) tokens.push_back(token);
    token.clear();
  };
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\\' && i + 1 < text.size() && text[i + 1] == '\n') {
      flush();
      ++i;
    } else if (c == '\\' && i + 1 < text.size()) {
      token += c;
      token += text[++i];
    } else if (c == '\n') {
      ++i;
      break;
    } else if (c == ' ' || c == '\t') {
      flush();
    } else {
      token += c;
    }
  }
  flush();
  *rest = text.substr(std::min(i, text.size()));
  return tokens;
}

std::string unescape(const std::string& raw) {
  std::string out;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '\\' && i + 1 < raw.size() && (raw[i + 1] == ' ' || raw[i + 1] == '#' || raw[i + 1] == '\\')) {
      out += raw[++i];
    } else if (raw[i] == '$' && i + 1 < raw.size() && raw[i + 1] == '$') {
      out += '$';
      ++i;
    } else {
      out += raw[i];
    }
  }
  return out;
}

// libcpp's make_write (mkdeps.cc): wrap at 72 columns, names counted as
// escaped, continuation lines indented by one space; -MP: "dep:" for every
// prerequisite but the first.
std::string write_gcc(const std::vector<std::string>& targets, const std::vector<std::string>& deps,
                      bool phony) {
  constexpr size_t kColMax = 72;
  std::string out;
  size_t col = 0;
  auto name = [&](const std::string& n) {
    if (col) {
      if (col + n.size() > kColMax) {
        out += " \\\n";
        col = 0;
      }
      ++col;
      out += ' ';
    }
    col += n.size();
    out += n;
  };
  for (const std::string& t : targets) name(t);
  out += ':';
  ++col;
  for (const std::string& d : deps) name(d);
  out += '\n';
  if (phony) {
    for (size_t i = 1; i < deps.size(); ++i) out += deps[i] + ":\n";
  }
  return out;
}

// clang's DependencyFileGenerator::outputDependencyFile: 75 columns, names
// counted unescaped, two-space indent; -MP: "\ndep:" for all but the main file.
std::string write_clang(const std::vector<std::string>& targets, const std::vector<std::string>& deps,
                        bool phony, size_t main_index) {
  constexpr size_t kMaxColumns = 75;
  std::string out;
  size_t columns = 0;
  for (const std::string& t : targets) {
    size_t n = t.size();
    if (columns == 0) {
      columns += n;
    } else if (columns + n + 2 > kMaxColumns) {
      columns = n + 2;
      out += " \\\n  ";
    } else {
      columns += n + 1;
      out += ' ';
    }
    out += t;
  }
  out += ':';
  columns += 1;
  for (const std::string& d : deps) {
    size_t n = unescape(d).size();
    if (columns + (n + 1) + 2 > kMaxColumns) {
      out += " \\\n ";
      columns = 2;
    }
    out += ' ';
    out += d;
    columns += n + 1;
  }
  out += '\n';
  if (phony) {
    for (size_t i = 0; i < deps.size(); ++i) {
      if (i != main_index) out += "\n" + deps[i] + ":\n";
    }
  }
  return out;
}

bool under_dir(const std::string& path, std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (dir.empty()) return false;
  if (dir == "/") return path.size() > 1 && path[0] == '/';
  return path.size() > dir.size() + 1 && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/';
}

}  // namespace

std::optional<std::string> derive_depfile(std::string_view full, const DepfileView& view) {
  std::string_view rest;
  std::vector<std::string> tokens = raw_tokens(full, &rest);
  std::vector<std::string> targets, deps;
  bool in_deps = false;
  for (std::string& t : tokens) {
    if (in_deps) {
      deps.push_back(std::move(t));
    } else if (t.size() > 1 && t.back() == ':' && t[t.size() - 2] != '\\') {
      targets.push_back(t.substr(0, t.size() - 1));
      in_deps = true;
    } else {
      targets.push_back(std::move(t));
    }
  }
  if (!in_deps || targets.empty() || deps.empty()) return std::nullopt;
  // The model must reproduce the compiler's own full file byte for byte.
  std::string again = view.gcc_layout ? write_gcc(targets, deps, view.phony)
                                      : write_clang(targets, deps, view.phony, 0);
  if (again != full) return std::nullopt;
  std::vector<std::string> kept;
  for (size_t i = 0; i < deps.size(); ++i) {
    if (i == 0 && view.drop_main) continue;
    bool system = false;
    if (view.user_only) {
      std::string path = unescape(deps[i]);
      for (const std::string& d : view.system_dirs) system |= under_dir(path, d);
    }
    if (!system) kept.push_back(deps[i]);
  }
  if (kept.empty()) return std::string();  // gcc writes nothing without prerequisites
  return view.gcc_layout ? write_gcc(targets, kept, view.phony)
                         : write_clang(targets, kept, view.phony, view.drop_main ? SIZE_MAX : 0);
}

}  // namespace ccpool::compiler
