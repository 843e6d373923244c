#include "tests/remote/redis_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

extern char** environ;

namespace ccpool::testing {
namespace {

int free_loopback_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

}  // namespace

void exit_125_without_redis() {
  if (access(kRedisServer, X_OK) != 0) {
    std::fprintf(stderr,
                 "SKIP: %s is not installed; install Debian's redis-server "
                 "(scripts/setup-deps.sh does) to run the remote tier tests\n",
                 kRedisServer);
    std::exit(125);
  }
}

Result<std::unique_ptr<RedisServer>> RedisServer::start(const std::string& dir,
                                                        std::vector<std::string> extra) {
  std::string last_error = "no attempt";
  for (int attempt = 0; attempt < 5; ++attempt) {
    int port = free_loopback_port();
    if (port < 0) continue;
    std::unique_ptr<RedisServer> server(new RedisServer(dir, extra, port));
    auto started = server->spawn();
    if (started) return server;
    last_error = started.error().message;
  }
  return make_error(ErrorCode::kIo, "cannot start redis-server: " + last_error);
}

Result<void> RedisServer::spawn() {
  std::vector<std::string> args = {kRedisServer, "--port",       std::to_string(m_port),
                                   "--bind",     "127.0.0.1",    "--save",
                                   "",           "--appendonly", "no",
                                   "--dir",      m_dir,          "--daemonize",
                                   "no",         "--logfile",    m_dir + "/redis.log"};
  args.insert(args.end(), m_extra.begin(), m_extra.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  if (posix_spawn(&m_pid, kRedisServer, nullptr, nullptr, argv.data(), environ) != 0) {
    return make_error(ErrorCode::kIo, "posix_spawn redis-server failed");
  }
  std::string password;
  for (size_t i = 0; i + 1 < m_extra.size(); ++i) {
    if (m_extra[i] == "--requirepass") password = m_extra[i + 1];
  }
  for (int i = 0; i < 250; ++i) {  // up to ~5 s for a loaded machine
    auto pong = command({"PING"}, password);
    if (pong && pong->str == "PONG") return ok();
    int status = 0;
    if (waitpid(m_pid, &status, WNOHANG) == m_pid) {
      m_pid = -1;
      return make_error(ErrorCode::kIo, "redis-server exited at start (port " +
                                            std::to_string(m_port) + " taken?); see " + m_dir +
                                            "/redis.log");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill();
  return make_error(ErrorCode::kTimeout,
                    "redis-server did not answer PING; see " + m_dir + "/redis.log");
}

RedisServer::~RedisServer() {
  kill();
}

void RedisServer::pause() {
  if (m_pid > 0) ::kill(m_pid, SIGSTOP);
}

void RedisServer::resume() {
  if (m_pid > 0) ::kill(m_pid, SIGCONT);
}

void RedisServer::kill() {
  if (m_pid <= 0) return;
  ::kill(m_pid, SIGKILL);
  int status = 0;
  waitpid(m_pid, &status, 0);
  m_pid = -1;
}

Result<void> RedisServer::restart() {
  kill();
  return spawn();
}

Result<remote::Reply> RedisServer::command(const std::vector<std::string_view>& args,
                                           const std::string& password) const {
  remote::Endpoint ep;
  ep.host = "127.0.0.1";
  ep.port = m_port;
  CCPOOL_TRY_ASSIGN(auto conn, remote::Connection::open(ep, password, std::chrono::seconds(2),
                                                        std::chrono::seconds(2)));
  // The test's own server: generous bounds (KEYS, large planted values).
  remote::ReplyLimits limits;
  limits.max_bulk = 1ull << 30;
  limits.max_elements = 1u << 20;
  limits.max_depth = 4;
  limits.max_total = 2ull << 30;
  return conn->command(args, limits);
}

}  // namespace ccpool::testing
