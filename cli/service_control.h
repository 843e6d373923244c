// Starting and reaching the node service from CLI commands (run, env, exec).
// Implemented in cli/service_control.cpp.
#pragma once

#include <cstdint>
#include <string>

#include "base/error.h"

namespace ccpool::cli {

struct ServiceSettings {
  std::string socket;       // resolved socket path
  std::string store_dir;    // empty: the service's own default
  int jobs = 0;             // 0: the service's default
  uint64_t mem_budget = 0;  // 0: the service's default
  int resp_port = 0;        // > 0: the Redis front also listens on 127.0.0.1:PORT
};

// Absolute path of the running ccpool executable (own_executable()); "ccpool"
// when /proc cannot tell.
std::string self_executable();

// Returns once a service answers ping on settings.socket, starting one
// (detached, in its own session, so a launcher's process hygiene never kills
// it) if none answers. Several callers racing get exactly one service. A
// service that already runs keeps its settings; a requested resp_port it does
// not serve is reported as an error naming the fix.
// A socket that is not ours (ipc::Client::connect's checks) is kPermission:
// nothing is started there.
Result<void> ensure_service(const ServiceSettings& settings);

// Before a job's Redis clients (redis-py in Inductor and Triton, which check
// nothing) are pointed at the front's Unix socket: its directory must be ours
// and the process listening on it must run as us. kPermission names the path.
Result<void> check_resp_socket(const std::string& resp_socket);

}  // namespace ccpool::cli
