// The client side of a redirected exec: send the request to the node service,
// replay the result, or run the tool locally when the service cannot help.
// Shared by the `ccpool-client` executable (what the LD_PRELOAD shim execs)
// and `ccpool exec`.
//
// ccpool-client argv contract (the shim relies on it):
//   ccpool-client [--inherited-socket=PATH] [--fallback=REASON] <resolved-program-path>
//   <original argv[0]> <original argv[1]> ...
// The resolved path must be absolute (the shim has already done PATH lookup),
// so a first argument starting with "--inherited-socket=" is never a program.
// PATH is the socket the shim's process saw when it started (its CCPOOL_SOCKET
// or XDG_RUNTIME_DIR): it survives a caller that cleans the environment of
// the exec (env -i, subprocess env={...}). REASON comes from
// ccpool-client-fast (client/fast_client.c) when it sent the request and lost
// it (the connection closed, a reply not `completed`): the tool then runs
// locally at once, as it would have had this client sent it.
#pragma once

#include <string>
#include <vector>

namespace ccpool::client {

struct ClientInvocation {
  std::string program;            // absolute, or resolved through PATH when not
  std::vector<std::string> argv;  // argv[0] as the caller gave it
  std::string socket;             // empty: CCPOOL_SOCKET > inherited_socket > default_socket_path()
  std::string inherited_socket;   // from the shim: --inherited-socket=PATH
  std::string fallback_reason;    // --fallback=REASON: run the tool locally, ask nothing
  std::vector<std::string> inputs, outputs;  // declared files (ccpool exec)
  // Path of the `ccpool` binary used to auto-start the service; empty:
  // CCPOOL_SERVICE_BINARY, else the `ccpool` next to the running executable.
  std::string ccpool_binary;
};

// Runs the invocation through the service, writes the tool's stdout/stderr to
// fds 1/2 byte-exact and returns its exit code. On any service trouble it
// execs the program itself (fallback, does not return) under the N-slot lock.
// Returns 127 only if the program cannot be exec'd at all (like a shell).
//
// Environment read:
//   CCPOOL_DISABLE=1          exec the program directly, no service
//   CCPOOL_SOCKET             socket path (when invocation.socket is empty)
//
// A socket it must not trust (check_socket_dir, check_peer_is_self) is
// reported on stderr, naming the path and the fix, and the program runs
// locally without touching that socket's directory.
//   CCPOOL_CLIENT_TIMEOUT     reply deadline ("1h" default, base/units syntax)
//   CCPOOL_NO_AUTOSTART=1     never start the service (tests)
//   CCPOOL_SERVICE_BINARY     the `ccpool` to auto-start (tests; default: sibling)
//   CCPOOL_JOBS               fallback slots (default: available_cpus())
//   RANK / LOCAL_RANK         the rank sent with the request
int run_client(const ClientInvocation& invocation);

// Parses `[--socket S] [--input F]... [--output F]... [--] PROGRAM ARGS...`
// starting at argv[first] (both "--opt value" and "--opt=value"). Everything
// from PROGRAM on is kept verbatim, dashes included. False for anything else
// (--help, an unknown option, no program): the caller reports usage.
bool parse_exec_args(int argc, char** argv, int first, ClientInvocation& inv);

// `ccpool-client` main: parses the argv contract above and calls run_client.
int client_main(int argc, char** argv);

}  // namespace ccpool::client
