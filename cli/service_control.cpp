#include "cli/service_control.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <thread>
#include <vector>

#include "ipc/client.h"

extern char** environ;

namespace ccpool::cli {

std::string self_executable() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "ccpool";
  return std::string(buf, static_cast<size_t>(n));
}

namespace {

bool answers(const std::string& socket) {
  auto client = ipc::Client::connect(socket, ipc::deadline_in(std::chrono::milliseconds(500)));
  return client && client->ping(ipc::deadline_in(std::chrono::milliseconds(1000)));
}

}  // namespace

Result<void> ensure_service(const ServiceSettings& settings) {
  if (answers(settings.socket)) return ok();
  std::vector<std::string> args = {self_executable(), "serve", "--socket", settings.socket};
  if (!settings.store_dir.empty()) args.insert(args.end(), {"--dir", settings.store_dir});
  if (settings.jobs > 0) args.insert(args.end(), {"--jobs", std::to_string(settings.jobs)});
  if (settings.mem_budget > 0) {
    args.insert(args.end(), {"--mem-budget", std::to_string(settings.mem_budget)});
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // `serve` daemonizes (setsid + double fork) and exits once the socket
  // listens, or at once when another instance holds the lock.
  pid_t pid;
  if (int rc = ::posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ); rc != 0) {
    return make_error(ErrorCode::kIo, "cannot start '" + args[0] + " serve': " + std::strerror(rc));
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (std::chrono::steady_clock::now() < until) {
    if (answers(settings.socket)) return ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return make_error(ErrorCode::kUnreachable,
                    "the ccpool service did not come up on '" + settings.socket +
                        "'; see the log in the socket's directory or run 'ccpool serve --foreground'");
}

}  // namespace ccpool::cli
