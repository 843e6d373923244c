// Test harness: a real Debian redis-server started by the test on a free
// loopback port with its own directory, stopped (SIGKILL) on destruction.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "remote/connection.h"

namespace ccpool::testing {

inline constexpr const char* kRedisServer = "/usr/bin/redis-server";

// Prints why and exits 125 (CTest skip) when redis-server is not installed.
void exit_125_without_redis();

class RedisServer {
 public:
  // `extra` is appended to the command line, e.g. {"--requirepass", "pw"}.
  static Result<std::unique_ptr<RedisServer>> start(const std::string& dir,
                                                    std::vector<std::string> extra = {});
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return m_port; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(m_port); }

  void pause();            // SIGSTOP: the server is slow (accepts, never answers)
  void resume();           // SIGCONT
  void kill();             // SIGKILL + reap: the server is down
  Result<void> restart();  // same port and arguments

  // One command on a fresh connection (planting values, reading TTLs).
  Result<remote::Reply> command(const std::vector<std::string_view>& args,
                                const std::string& password = "") const;

 private:
  RedisServer(std::string dir, std::vector<std::string> extra, int port)
      : m_dir(std::move(dir)), m_extra(std::move(extra)), m_port(port) {}
  Result<void> spawn();

  std::string m_dir;
  std::vector<std::string> m_extra;
  int m_port;
  pid_t m_pid = -1;
};

}  // namespace ccpool::testing
