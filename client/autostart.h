// Connecting to the service, starting it first when nobody answers.
#pragma once

#include <string>
#include <vector>

#include "base/error.h"
#include "ipc/client.h"

namespace ccpool::client {

// `ccpool` next to the running executable (own_executable_dir()).
std::string sibling_ccpool_binary();

// Starts `<ccpool_binary> serve --socket <socket>` fully detached: a double
// fork (no zombie is left with us), setsid, stdio on /dev/null (so "already
// running" chatter never mixes into the tool's output) and the shim removed
// from LD_PRELOAD (the service must never intercept its own children).
// Returns immediately; the serve command's lock makes concurrent starts safe.
Result<void> start_service(const std::string& ccpool_binary, const std::string& socket,
                           const std::vector<std::string>& env);

// Connects with a short handshake deadline; the hello goes out with the
// first request (ipc::Handshake::kWithFirstRequest), so a failed handshake
// shows as that request's error. When the service is unreachable
// and autostart is allowed, starts it and retries with backoff (5 ms doubling
// to 250 ms) for about `startup_budget`.
Result<ipc::Client> connect_or_start(const std::string& socket, const std::string& ccpool_binary,
                                     bool autostart, const std::vector<std::string>& env,
                                     std::chrono::milliseconds startup_budget);

}  // namespace ccpool::client
