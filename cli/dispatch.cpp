// `ccpool`: a small, statically linked front door. `ccpool exec` is on the
// hot path of every redirected compile, so it is served here with only the
// client library loaded (no dynamic loader work, no CLI11 set-up); every other
// command, and any `exec` form this parser does not recognise (--help, a bad
// option), is handed to the full CLI, `ccpool-cli`, next to this binary.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "client/client_main.h"

namespace {

std::string self_dir() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string path(buf, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/'));
}

// Matches "--name value" or "--name=value"; advances i past what it used.
bool take_value(int argc, char** argv, int& i, const char* name, std::string& out) {
  size_t len = std::strlen(name);
  if (std::strncmp(argv[i], name, len) != 0) return false;
  if (argv[i][len] == '=') {
    out = argv[i] + len + 1;
    return true;
  }
  if (argv[i][len] != '\0' || i + 1 >= argc) return false;
  out = argv[++i];
  return true;
}

// ccpool exec [--socket S] [--input F]... [--output F]... [--] PROGRAM ARGS...
bool parse_exec(int argc, char** argv, ccpool::client::ClientInvocation& inv) {
  int i = 2;
  for (; i < argc; ++i) {
    std::string value;
    if (std::strcmp(argv[i], "--") == 0) {
      ++i;
      break;
    }
    if (take_value(argc, argv, i, "--socket", value)) {
      inv.socket = value;
    } else if (take_value(argc, argv, i, "--input", value)) {
      inv.inputs.push_back(value);
    } else if (take_value(argc, argv, i, "--output", value)) {
      inv.outputs.push_back(value);
    } else if (argv[i][0] == '-') {
      return false;  // --help or an unknown option: the full CLI explains
    } else {
      break;
    }
  }
  if (i >= argc) return false;
  inv.program = argv[i];
  inv.argv.assign(argv + i, argv + argc);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "exec") == 0) {
    ccpool::client::ClientInvocation inv;
    if (parse_exec(argc, argv, inv)) return ccpool::client::run_client(inv);
  }
  std::string cli = self_dir() + "/ccpool-cli";
  ::execv(cli.c_str(), argv);
  std::fprintf(stderr, "ccpool: cannot run '%s': %s; reinstall ccpool (it belongs next to %s)\n",
               cli.c_str(), std::strerror(errno), argv[0]);
  return 1;
}
