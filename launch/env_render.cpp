// Rendering of a LaunchEnv for `ccpool env`: POSIX sh, fish, or JSON.
// Hand-written escaping keeps ccpool_launch on ccpool_base only.
#include <cstdio>

#include "launch/launch_env.h"

namespace ccpool::launch {
namespace {

// POSIX single quotes: nothing is special inside except ', written '\''.
std::string sh_quote(const std::string& value) {
  std::string out = "'";
  for (char c : value) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

// fish single quotes: backslash and ' are escaped with a backslash.
std::string fish_quote(const std::string& value) {
  std::string out = "'";
  for (char c : value) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

std::string json_quote(const std::string& value) {
  std::string out = "\"";
  for (unsigned char c : value) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

}  // namespace

Result<Shell> parse_shell(const std::string& name) {
  if (name == "sh" || name == "bash" || name == "zsh") return Shell::kSh;
  if (name == "fish") return Shell::kFish;
  if (name == "json") return Shell::kJson;
  return make_error(ErrorCode::kInvalidArgument,
                    "unknown shell '" + name + "'; use sh, fish or json");
}

std::string render_launch_env(const LaunchEnv& launch_env, Shell shell,
                              const std::string& service_hint) {
  std::string out;
  if (shell == Shell::kJson) {
    out = "{";
    bool first = true;
    for (const EnvSetting& s : launch_env.settings) {
      out += first ? "\n  " : ",\n  ";
      first = false;
      out += json_quote(s.name) + ": " + json_quote(s.value);
    }
    return out + "\n}\n";
  }
  out = "# start the node service first (ccpool run does this itself): " + service_hint + "\n";
  for (const EnvSetting& s : launch_env.settings) {
    if (shell == Shell::kSh) {
      out += "export " + s.name + "=" + sh_quote(s.value) + "\n";
    } else {
      out += "set -gx " + s.name + " " + fish_quote(s.value) + "\n";
    }
  }
  return out;
}

}  // namespace ccpool::launch
