// The service's I/O thread: accepts on the Unix socket, checks SO_PEERCRED,
// runs the handshake, decodes frames and writes replies. Decoded requests go
// to `on_message` (the service posts an exec request to the scheduler's
// request threads, or serves a hit at once when the I/O thread has nothing
// else to do: ExecPipeline::submit), and replies come back through send()
// (any thread). send() on another thread writes a reply to the socket itself
// when the connection has nothing queued (a hit's reply then costs no wake-up
// of the I/O thread); what the socket does not take, and everything behind
// it, goes through the I/O thread.
//
// What the I/O thread answers while it reads a connection (hello-ok, and
// replies sent from on_message) is written once, after the frames of that
// read: a client that sends hello and its request in one write gets hello-ok
// and a hit's reply in one write too, and wakes once.
//
// Per connection: a FrameReader and an output buffer. A malformed, oversized or
// wrong-version frame gets an ErrorFrame and only that connection is closed.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/error.h"
#include "base/event_loop.h"
#include "base/fs.h"
#include "base/thread_annotations.h"
#include "ipc/protocol.h"
#include "ipc/socket.h"

namespace ccpool::service {

struct HubCounters {
  std::atomic<uint64_t> accepted{0}, refused_peers{0}, protocol_errors{0};
  // send(2) calls that wrote bytes to a connection, on any thread: frames
  // per write is what the coalescing above buys.
  std::atomic<uint64_t> writes{0};
};

class ConnectionHub {
 public:
  struct Callbacks {
    // I/O thread; must return quickly. Handshake frames never reach it.
    // `passed_fd` is the descriptor the frame carried (an exec frame's stdin),
    // or empty.
    std::function<void(uint64_t conn_id, const ipc::PeerCred& peer, ipc::Message message,
                       UniqueFd passed_fd)>
        on_message;
    // I/O thread; the connection is gone (closed by the peer or by us).
    std::function<void(uint64_t conn_id)> on_disconnect;
  };

  // Listens on socket_path, or accepts on `inherited` (a non-blocking
  // listening socket from systemd, whose path belongs to systemd: never unlinked).
  static Result<std::unique_ptr<ConnectionHub>> create(const std::string& socket_path,
                                                       Callbacks callbacks,
                                                       UniqueFd inherited = UniqueFd());
  ~ConnectionHub();
  ConnectionHub(const ConnectionHub&) = delete;
  ConnectionHub& operator=(const ConnectionHub&) = delete;

  // Runs the loop until should_stop() returns true after a wake-up or tick.
  // on_tick runs about once a second on the I/O thread.
  void run(const std::function<bool()>& should_stop, const std::function<void()>& on_tick);

  // Thread-safe. Queues a whole frame for the connection (dropped if it is gone).
  void send(uint64_t conn_id, const ipc::Message& message, bool close_after = false);
  // Thread-safe and async-signal-safe: interrupts the loop's wait.
  void wake() { m_loop->wake(); }
  // Closes the listening socket and unlinks its path unless it was inherited
  // (shutdown: stop accepting).
  void stop_accepting();
  // Writes pending output for up to `budget`, then returns (shutdown).
  void flush_pending(std::chrono::milliseconds budget);

  // I/O thread only, from on_message: whether the event being handled is the
  // only one its wait returned (a wake-up counts: frames of other threads wait
  // behind it), so that nothing else waits while on_message does a little more
  // than return (a hit served on the I/O thread).
  bool quiet() const { return m_quiet; }

  size_t connection_count() const { return m_connection_count.load(); }
  std::chrono::steady_clock::time_point last_activity() const;
  const HubCounters& counters() const { return m_counters; }
  void note_protocol_error() { ++m_counters.protocol_errors; }

 private:
  struct Connection;
  struct Lane;  // what send() on another thread may use of a connection
  struct Outgoing {
    uint64_t conn_id;
    std::string bytes;
    bool close_after;
  };

  ConnectionHub(std::string path, UniqueFd listen_fd, std::unique_ptr<EventLoop> loop,
                Callbacks callbacks);
  void accept_all();
  void handle_readable(Connection& conn);
  void handle_frame(Connection& conn, ipc::Message message);
  // `from_outbox`: the bytes were counted in the connection's Lane::queued.
  // `write_now` false: only queued; handle_readable writes after the read's frames.
  void queue_bytes(Connection& conn, std::string bytes, bool close_after, bool from_outbox = false,
                   bool write_now = true);
  void write_some(Connection& conn);
  void close_connection(uint64_t conn_id);
  void drain_outbox();
  void refuse(int fd, ErrorCode code, const std::string& message);

  std::string m_path;
  ino_t m_socket_inode = 0;  // stop_accepting unlinks m_path only while it is still our socket
  UniqueFd m_listen_fd;
  std::unique_ptr<EventLoop> m_loop;  // tags: kListenTag, EventLoop::kWakeTag, connection ids
  Callbacks m_callbacks;
  HubCounters m_counters;
  std::atomic<size_t> m_connection_count{0};
  std::atomic<int64_t> m_last_activity_ns{0};
  std::atomic<std::thread::id> m_io_thread{};  // the thread in run(), once it runs
  bool m_quiet = false;                        // I/O thread only (quiet())
  uint64_t m_next_conn_id = 1;                 // I/O thread only
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> m_conns;  // I/O thread only
  Mutex m_outbox_mutex;
  std::deque<Outgoing> m_outbox GUARDED_BY(m_outbox_mutex);
  Mutex m_lanes_mutex;
  std::unordered_map<uint64_t, std::shared_ptr<Lane>> m_lanes
      GUARDED_BY(m_lanes_mutex);  // open connections
};

}  // namespace ccpool::service
