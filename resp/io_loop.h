// One epoll thread of the front. Every loop polls both listeners (with
// EPOLLEXCLUSIVE, so a new connection wakes one loop) and owns the connections
// it accepted for their whole life: no connection state crosses threads.
// Internal to ccpool_resp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/event_loop.h"
#include "base/fs.h"
#include "resp/front.h"
#include "resp/session.h"

namespace ccpool::resp {

struct Connection;
struct Completions;  // replies of deferred commands, posted from any thread

struct LoopConfig {
  int unix_listener = -1;  // -1: none
  int tcp_listener = -1;
  uint64_t max_value = 0;
  size_t max_args = 0;
  size_t max_connections = 0;
  size_t max_unauthenticated = 0;
};

class IoLoop {
 public:
  IoLoop(SharedState& shared, const LoopConfig& config);
  ~IoLoop();  // stops and joins the thread, closes its connections
  IoLoop(const IoLoop&) = delete;
  IoLoop& operator=(const IoLoop&) = delete;

  Result<void> start();

 private:
  void run();
  void accept_from(int listener);
  Session::ReplyLater defer(Connection& conn, size_t value_bytes, bool stores);
  void on_completions();
  void deliver(Connection& conn);  // queues the replies of answered SETs, in order
  bool admit(int fd, bool is_unix);
  void on_event(Connection& conn, uint32_t events);
  bool read_some(Connection& conn);  // false: the socket failed
  bool process(Connection& conn);    // true: stopped at the high-water mark, more may wait
  bool refuse_cross_protocol(Connection& conn, const std::vector<std::string>& argv,
                             std::string& sink);
  bool flush(Connection& conn);  // false: the socket failed
  void update(Connection& conn);
  void close_connection(int fd);
  void leave_pre_auth(Connection& conn);  // first successful AUTH: full bounds

  SharedState& m_shared;
  LoopConfig m_config;
  std::unique_ptr<EventLoop> m_loop;  // tags: descriptors; a wake-up stops the loop
  std::thread m_thread;
  std::shared_ptr<Completions> m_completions;  // shared with pending SETs: may outlive the loop
  std::unordered_map<int, std::unique_ptr<Connection>> m_connections;  // loop thread only
  bool m_deferred_in_pass = false;  // a reply was deferred since the last end_of_burst
  uint64_t m_next_serial = 1;  // tells a reused fd's connection from the one a completion meant
  std::unique_ptr<char[]> m_read_buffer;
};

}  // namespace ccpool::resp
