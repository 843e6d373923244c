#include "client/client_main.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "base/fs.h"
#include "base/paths.h"
#include "base/process_facts.h"
#include "base/units.h"
#include "client/autostart.h"
#include "client/fallback.h"
#include "client/request.h"
#include "ipc/client.h"

namespace ccpool::client {
namespace {

constexpr auto kDefaultReplyTimeout = std::chrono::hours(1);
constexpr auto kStartupBudget = std::chrono::milliseconds(5000);

bool env_flag(const std::vector<std::string>& env, std::string_view name) {
  auto value = env_value(env, name);
  return value && !value->empty() && *value != "0";
}

std::chrono::milliseconds reply_timeout(const std::vector<std::string>& env) {
  if (auto text = env_value(env, "CCPOOL_CLIENT_TIMEOUT")) {
    auto parsed = parse_duration(*text);
    if (parsed && parsed->count() > 0) return *parsed;
  }
  return kDefaultReplyTimeout;
}

// Replays the tool's output; a closed stdout (EPIPE) is the reader's choice,
// as it would have been for the tool itself, so write errors are ignored.
int replay(const ipc::ExecReply& reply) {
  (void)write_all(1, reply.stdout_data);
  (void)write_all(2, reply.stderr_data);
  return reply.exit_code & 0xff;
}

std::string status_reason(const ipc::ExecReply& reply) {
  const char* what =
      reply.status == ipc::ExecStatus::kStopping ? "service stopping" : "service failed";
  return reply.message.empty() ? what : std::string(what) + ": " + reply.message;
}

}  // namespace

int run_client(const ClientInvocation& inv) {
  std::vector<std::string> env = current_environment();
  std::vector<std::string> argv =
      inv.argv.empty() ? std::vector<std::string>{inv.program} : inv.argv;
  char cwd_buf[4096];
  std::string cwd = ::getcwd(cwd_buf, sizeof cwd_buf) ? cwd_buf : ".";
  auto program = resolve_program(inv.program, cwd, env);
  if (!program) {
    std::string message = "ccpool: " + program.error().message + "\n";
    (void)write_all(2, message);
    return 127;
  }
  if (env_flag(env, "CCPOOL_DISABLE")) return exec_program(*program, argv, env);

  std::string socket = inv.socket;
  if (socket.empty() && !env_value(env, "CCPOOL_SOCKET")) socket = inv.inherited_socket;
  socket = default_socket_path(socket);
  std::string state_dir = state_dir_for_socket(socket);
  if (!inv.fallback_reason.empty())
    return run_fallback(state_dir, inv.fallback_reason, *program, argv, env);
  auto request = build_request(*program, argv, inv.inputs, inv.outputs);
  if (!request) return run_fallback(state_dir, request.error().message, *program, argv, env);

  std::string ccpool_binary = inv.ccpool_binary;
  if (ccpool_binary.empty()) {
    auto override_path = env_value(env, "CCPOOL_SERVICE_BINARY");
    ccpool_binary = override_path ? std::string(*override_path) : sibling_ccpool_binary();
  }
  // Not our service, or not our directory: say so, and keep out of it.
  auto refused = [&](const Error& error) {
    (void)write_all(2, "ccpool: " + error.message + "; running '" + *program + "' locally\n");
    return run_fallback("", error.message, *program, argv, env);
  };
  auto client = connect_or_start(socket, ccpool_binary, !env_flag(env, "CCPOOL_NO_AUTOSTART"), env,
                                 kStartupBudget);
  if (!client && client.error().code == ErrorCode::kPermission) return refused(client.error());
  if (!client) return run_fallback(state_dir, client.error().message, *program, argv, env);
  // Our stdin goes along: a pass-through tool (e.g. `gcc -x c -`) reads it.
  // The handshake happens here too (hello and exec in one write), so a
  // refusal in it is a permission error of this call.
  int stdin_fd = ::fcntl(0, F_GETFD) >= 0 ? 0 : -1;
  auto reply = client->exec(*request, ipc::deadline_in(reply_timeout(env)), stdin_fd);
  if (!reply && reply.error().code == ErrorCode::kPermission) return refused(reply.error());
  if (!reply) return run_fallback(state_dir, reply.error().message, *program, argv, env);
  if (reply->status != ipc::ExecStatus::kCompleted) {
    return run_fallback(state_dir, status_reason(*reply), *program, argv, env);
  }
  return replay(*reply);
}

int client_main(int argc, char** argv) {
  constexpr std::string_view kInherited = "--inherited-socket=";
  constexpr std::string_view kFallback = "--fallback=";
  ClientInvocation inv;
  if (argc >= 2 && std::string_view(argv[1]).substr(0, kInherited.size()) == kInherited) {
    inv.inherited_socket = argv[1] + kInherited.size();
    --argc;
    ++argv;
  }
  if (argc >= 2 && std::string_view(argv[1]).substr(0, kFallback.size()) == kFallback) {
    inv.fallback_reason = argv[1] + kFallback.size();
    if (inv.fallback_reason.empty()) inv.fallback_reason = "ccpool-client-fast lost the request";
    --argc;
    ++argv;
  }
  if (argc < 3) {
    static constexpr char kUsage[] =
        "usage: ccpool-client [--inherited-socket=PATH] [--fallback=REASON] "
        "<resolved-program-path> "
        "<argv0> [args...]\n"
        "  (exec'd by libccpool-shim.so; use `ccpool exec -- PROGRAM ARGS...` by hand)\n";
    (void)write_all(2, kUsage);
    return 2;
  }
  inv.program = argv[1];
  inv.argv.assign(argv + 2, argv + argc);
  return run_client(inv);
}

namespace {

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

}  // namespace

bool parse_exec_args(int argc, char** argv, int first, ClientInvocation& inv) {
  int i = first;
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
      return false;  // --help or an unknown option: the caller explains the usage
    } else {
      break;
    }
  }
  if (i >= argc) return false;
  inv.program = argv[i];
  inv.argv.assign(argv + i, argv + argc);
  return true;
}

}  // namespace ccpool::client
