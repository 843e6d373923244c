#include "cli/service_control.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "base/paths.h"
#include "base/process.h"
#include "base/process_facts.h"
#include "base/shim_env.h"
#include "base/unix_socket.h"
#include "ipc/client.h"

extern char** environ;

namespace ccpool::cli {

std::string self_executable() {
  std::string exe = own_executable();
  return exe.empty() ? "ccpool" : exe;
}

namespace {

// true: our service answered a ping; false: nobody (yet); kPermission: the
// socket is not ours (see ipc::Client::connect), so never start one there.
Result<bool> answers(const std::string& socket) {
  auto client = ipc::Client::connect(socket, ipc::deadline_in(std::chrono::milliseconds(500)));
  if (!client && client.error().code == ErrorCode::kPermission)
    return tl::unexpected(client.error());
  return client && client->ping(ipc::deadline_in(std::chrono::milliseconds(1000)));
}

// The running service must serve the Redis front on the port the job is told.
Result<void> check_resp_port(const ServiceSettings& settings) {
  if (settings.resp_port <= 0) return ok();
  auto client = ipc::Client::connect(settings.socket, ipc::deadline_in(std::chrono::seconds(2)));
  if (!client) return make_error(client.error().code, client.error().message);
  auto status = client->status_json(ipc::deadline_in(std::chrono::seconds(5)));
  if (!status) return make_error(status.error().code, status.error().message);
  auto port = nlohmann::json::parse(*status, nullptr, false).value("resp_port", 0);
  if (port == settings.resp_port) return ok();
  return make_error(ErrorCode::kInvalidArgument,
                    "the service on '" + settings.socket + "' serves the Redis front on port " +
                        std::to_string(port) + ", not " + std::to_string(settings.resp_port) +
                        "; run 'ccpool stop --socket " + settings.socket +
                        "' so it restarts with --resp-port, or use its port");
}

constexpr int kStartAttempts = 3;

// True while some process holds the socket's instance lock (running or starting).
bool lock_held(const std::string& socket) {
  std::string path = state_dir_for_socket(socket) + "/serve.lock";
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  bool held = ::flock(fd, LOCK_EX | LOCK_NB) != 0;
  ::close(fd);
  return held;
}

}  // namespace

Result<void> ensure_service(const ServiceSettings& settings) {
  CCPOOL_TRY_ASSIGN(bool up, answers(settings.socket));
  if (up) return check_resp_port(settings);
  std::vector<std::string> args = {self_executable(), "serve", "--socket", settings.socket};
  if (!settings.store_dir.empty()) args.insert(args.end(), {"--dir", settings.store_dir});
  if (settings.jobs > 0) args.insert(args.end(), {"--jobs", std::to_string(settings.jobs)});
  if (settings.mem_budget > 0) {
    args.insert(args.end(), {"--mem-budget", std::to_string(settings.mem_budget)});
  }
  if (settings.resp_port > 0)
    args.insert(args.end(), {"--resp-port", std::to_string(settings.resp_port)});
  std::vector<char*> argv = c_string_array(args);
  std::vector<std::string> env_storage;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) env_storage.emplace_back(*e);
  env_storage = environment_without_shim(env_storage);
  std::vector<char*> envp = c_string_array(env_storage);
  // `serve` daemonizes (setsid + double fork) and exits once the socket
  // listens, or at once when another instance holds the lock. Its
  // "serving on ..." line must not land in the output of the job we launch.
  auto start_serve = [&]() -> Result<int> {  // its exit status
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    int rc = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      return make_error(ErrorCode::kIo,
                        "cannot start '" + args[0] + " serve': " + std::strerror(rc));
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return status;
  };
  std::string log = state_dir_for_socket(settings.socket) + "/ccpool.log";
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  // If the instance whose lock made our serve exit dies without ever
  // answering (killed while it started or stopped), nothing is left to wait
  // for: start ours again, a few times.
  for (int attempt = 0; attempt < kStartAttempts; ++attempt) {
    CCPOOL_TRY_ASSIGN(int status, start_serve());
    bool lock_freed = false;
    while (!lock_freed && std::chrono::steady_clock::now() < until) {
      CCPOOL_TRY_ASSIGN(bool now_up, answers(settings.socket));
      if (now_up) return check_resp_port(settings);
      // Our serve failed and no other instance is starting (the lock is free).
      lock_freed = status != 0 && !lock_held(settings.socket);
      if (!lock_freed) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!lock_freed) break;  // the deadline passed
  }
  return make_error(ErrorCode::kUnreachable,
                    "the ccpool service did not come up on '" + settings.socket + "'; see " + log +
                        " or run 'ccpool serve --foreground --socket " + settings.socket + "'");
}

Result<void> check_resp_socket(const std::string& resp_socket) {
  CCPOOL_TRY(check_socket_dir(resp_socket));
  CCPOOL_TRY_ASSIGN(sockaddr_un addr, unix_address(resp_socket));
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return make_error(ErrorCode::kIo, "socket() failed: " + errno_text(errno));
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    return make_error(ErrorCode::kUnreachable,
                      "nothing listens on the Redis front's socket '" + resp_socket + "' (" +
                          errno_text(errno) +
                          "); the service runs with --no-resp? restart it with `ccpool stop`");
  }
  return check_peer_is_self(fd.get(), resp_socket);
}

}  // namespace ccpool::cli
