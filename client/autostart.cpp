#include "client/autostart.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <thread>

#include "base/process.h"
#include "base/process_facts.h"
#include "client/fallback.h"
#include "client/request.h"

namespace ccpool::client {
namespace {

constexpr auto kHandshakeBudget = std::chrono::milliseconds(2000);

[[noreturn]] void exec_serve_in_grandchild(const std::vector<char*>& args,
                                           const std::vector<char*>& envp) {
  ::setsid();
  int null_fd = ::open("/dev/null", O_RDWR);
  if (null_fd >= 0) {
    ::dup2(null_fd, 0);
    ::dup2(null_fd, 1);
    ::dup2(null_fd, 2);
  }
  ::execve(args[0], args.data(), envp.data());
  ::_exit(127);
}

}  // namespace

std::string sibling_ccpool_binary() {
  std::string dir = own_executable_dir();
  return dir.empty() ? "ccpool" : dir + "/ccpool";
}

Result<void> start_service(const std::string& ccpool_binary, const std::string& socket,
                           const std::vector<std::string>& env) {
  if (::access(ccpool_binary.c_str(), X_OK) != 0) {
    return make_error(ErrorCode::kNotFound,
                      "cannot start the service: '" + ccpool_binary + "' is not executable");
  }
  // Everything the children need is built before fork: after fork only
  // async-signal-safe calls (the caller may have threads, e.g. `ccpool exec`).
  std::vector<std::string> argv_storage = {ccpool_binary, "serve", "--socket", socket};
  std::vector<std::string> env_storage = environment_without_shim(env);
  std::vector<char*> args = c_string_array(argv_storage);
  std::vector<char*> envp = c_string_array(env_storage);

  pid_t child = ::fork();
  if (child < 0) return make_error(ErrorCode::kIo, "fork failed while starting the service");
  if (child == 0) {
    pid_t grandchild = ::fork();
    if (grandchild == 0) exec_serve_in_grandchild(args, envp);
    ::_exit(grandchild < 0 ? 1 : 0);
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  return ok();
}

Result<ipc::Client> connect_or_start(const std::string& socket, const std::string& ccpool_binary,
                                     bool autostart, const std::vector<std::string>& env,
                                     std::chrono::milliseconds startup_budget) {
  auto client = ipc::Client::connect(socket, ipc::deadline_in(kHandshakeBudget), 0,
                                     ipc::Handshake::kWithFirstRequest);
  if (client || client.error().code != ErrorCode::kUnreachable || !autostart) return client;
  CCPOOL_TRY(start_service(ccpool_binary, socket, env));
  auto give_up = std::chrono::steady_clock::now() + startup_budget;
  auto backoff = std::chrono::milliseconds(5);
  for (;;) {
    std::this_thread::sleep_for(backoff);
    client = ipc::Client::connect(socket, ipc::deadline_in(kHandshakeBudget), 0,
                                  ipc::Handshake::kWithFirstRequest);
    if (client || client.error().code != ErrorCode::kUnreachable) return client;
    if (std::chrono::steady_clock::now() >= give_up) return client;
    backoff = std::min(backoff * 2, std::chrono::milliseconds(250));
  }
}

}  // namespace ccpool::client
