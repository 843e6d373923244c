// `GET /metrics` on 127.0.0.1:PORT: a minimal HTTP/1.1 responder on a thread of
// its own, so a slow or hostile scraper never touches the I/O thread or the
// arena. Bounds: kMaxConnections open at once (more wait in the backlog), at
// most kMaxPerUid of them from one local uid (the peer's uid comes from the
// kernel, as for the Redis front's TCP port; one more closes, with a 503, that
// uid's oldest connection still waiting for its request), a request of at
// most kMaxRequestBytes, kIoTimeout to read a
// request and to write its reply; every reply closes its connection. So any
// local user may scrape, but no user can hold the endpoint away from the
// others by keeping idle connections open. Answers GET and HEAD of /metrics
// (200), other paths (404), other methods (405), bad requests (400).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "base/error.h"
#include "base/event_loop.h"
#include "base/fs.h"
#include "service/metrics.h"

namespace ccpool::service {

class MetricsServer {
 public:
  static constexpr size_t kMaxConnections = 64;
  static constexpr size_t kMaxPerUid = 4;
  static constexpr size_t kMaxRequestBytes = 8192;
  static constexpr int kIoTimeoutMs = 5000;

  // Called on the server's thread for each scrape.
  using Render = std::function<std::string(MetricsFormat)>;

  // Binds 127.0.0.1:port (0: a free port, see port()) and starts the thread.
  // Errors: kIo naming the port and the fix.
  static Result<std::unique_ptr<MetricsServer>> start(int port, Render render);
  ~MetricsServer();  // stops and joins the thread; open connections are closed
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  int port() const { return m_port; }

 private:
  MetricsServer(UniqueFd listen_fd, std::unique_ptr<EventLoop> loop, int port, Render render);
  void run();

  UniqueFd m_listen_fd;
  // Tags: kListenTag, connection ids, EventLoop::kWakeTag (stop).
  std::unique_ptr<EventLoop> m_loop;
  int m_port;
  Render m_render;
  std::thread m_thread;
};

// Parses one HTTP request head (up to and including the blank line) and
// returns the reply to send: status line, headers and body. Pure, for tests.
std::string metrics_reply(std::string_view request_head, const MetricsServer::Render& render);

}  // namespace ccpool::service
