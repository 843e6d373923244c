#include "service/connection_hub.h"

#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ccpool::service {
namespace {

constexpr size_t kMaxConnections = 4096;
constexpr uint64_t kListenTag = 0;   // connection ids start at 1
constexpr size_t kMaxPassedFds = 4;  // per connection, unclaimed; more is a protocol error

// recv() that also collects SCM_RIGHTS descriptors (close-on-exec) into `fds`.
ssize_t recv_with_fds(int fd, char* buf, size_t len, std::deque<UniqueFd>& fds) {
  iovec iov{buf, len};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
  if (n < 0) return n;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int passed;
      std::memcpy(&passed, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      fds.emplace_back(passed);
    }
  }
  return n;
}

int64_t now_ns() {
  return std::chrono::steady_clock::now().time_since_epoch().count();
}

}  // namespace

// A connection as send() on another thread sees it. Whoever writes to the
// socket holds `mutex`, so bytes never interleave; send() writes itself only
// when nothing is queued before it (no frame in the outbox, no unwritten bytes
// at the I/O thread), so frames keep the order of their send() calls.
struct ConnectionHub::Lane {
  Mutex mutex;
  int fd GUARDED_BY(mutex) = -1;        // the connection's socket; -1 once the I/O thread closes it
  size_t queued GUARDED_BY(mutex) = 0;  // its frames in the outbox, not yet taken by the I/O thread
  bool backlog GUARDED_BY(mutex) = false;  // the I/O thread holds bytes of it not yet written
};

struct ConnectionHub::Connection {
  uint64_t id = 0;
  std::shared_ptr<Lane> lane;
  UniqueFd fd;
  ipc::PeerCred peer{};
  ipc::FrameReader reader;
  bool greeted = false;
  bool closing = false;  // close once the output buffer is written
  bool want_out = false;
  bool reading = false;  // in handle_readable: what is queued is written after the read's frames
  std::string out;
  size_t out_pos = 0;
  std::deque<UniqueFd> passed_fds;  // SCM_RIGHTS fds received, not yet claimed by a frame
};

Result<std::unique_ptr<ConnectionHub>> ConnectionHub::create(const std::string& socket_path,
                                                             Callbacks callbacks,
                                                             UniqueFd inherited) {
  bool owns_path = !inherited;
  UniqueFd listen_fd = std::move(inherited);
  ino_t inode = 0;
  if (owns_path) {
    CCPOOL_TRY_ASSIGN(listen_fd, ipc::listen_unix(socket_path, &inode));
  }
  CCPOOL_TRY_ASSIGN(std::unique_ptr<EventLoop> loop, EventLoop::create());
  [[maybe_unused]] auto watched = loop->watch(listen_fd.get(), EPOLLIN, kListenTag);
  auto hub = std::unique_ptr<ConnectionHub>(
      new ConnectionHub(owns_path ? socket_path : std::string(), std::move(listen_fd),
                        std::move(loop), std::move(callbacks)));
  hub->m_socket_inode = inode;
  return hub;
}

ConnectionHub::ConnectionHub(std::string path, UniqueFd listen_fd, std::unique_ptr<EventLoop> loop,
                             Callbacks callbacks)
    : m_path(std::move(path)),
      m_listen_fd(std::move(listen_fd)),
      m_loop(std::move(loop)),
      m_callbacks(std::move(callbacks)) {
  m_last_activity_ns = now_ns();
}

ConnectionHub::~ConnectionHub() {
  stop_accepting();
}

std::chrono::steady_clock::time_point ConnectionHub::last_activity() const {
  return std::chrono::steady_clock::time_point(
      std::chrono::steady_clock::duration(m_last_activity_ns.load()));
}

void ConnectionHub::stop_accepting() {
  if (!m_listen_fd) return;
  m_loop->unwatch(m_listen_fd.get());
  m_listen_fd.reset();
  // An inherited socket (m_path empty) is systemd's; ours only while the path
  // still names the socket we bound.
  struct stat st;
  if (!m_path.empty() && ::lstat(m_path.c_str(), &st) == 0 && st.st_ino == m_socket_inode) {
    ::unlink(m_path.c_str());
  }
}

void ConnectionHub::send(uint64_t conn_id, const ipc::Message& message, bool close_after) {
  auto encoded = ipc::encode_checked(message);
  if (!encoded) {
    // A result over the frame bound: the client runs the tool itself.
    spdlog::warn("reply to connection {} not sendable: {}", conn_id, encoded.error().message);
    ipc::ExecReply reply;
    reply.status = ipc::ExecStatus::kFailed;
    reply.message = "result too large for the protocol: " + encoded.error().message;
    encoded = ipc::encode_checked(reply);
    if (!encoded) return;
  }
  std::string bytes = std::move(*encoded);
  if (!close_after && std::this_thread::get_id() == m_io_thread.load()) {
    // on_message answering the connection being read: written after the
    // read's frames, with them (unless another thread's frames wait in the
    // outbox: then behind them, as below).
    auto it = m_conns.find(conn_id);
    if (it != m_conns.end() && it->second->reading) {
      Connection& conn = *it->second;
      bool behind_outbox;
      {
        MutexLock lock(&conn.lane->mutex);
        behind_outbox = conn.lane->queued > 0;
      }
      if (!behind_outbox) {
        queue_bytes(conn, std::move(bytes), false, false, false);
        return;
      }
    }
  }
  std::shared_ptr<Lane> lane;
  {
    MutexLock lock(&m_lanes_mutex);
    auto it = m_lanes.find(conn_id);
    if (it == m_lanes.end()) return;  // gone
    lane = it->second;
  }
  {
    MutexLock lock(&lane->mutex);
    if (lane->fd < 0) return;  // closed meanwhile
    if (!close_after && lane->queued == 0 && !lane->backlog) {
      size_t written = 0;
      while (written < bytes.size()) {
        ssize_t n = ::send(lane->fd, bytes.data() + written, bytes.size() - written,
                           MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
          written += static_cast<size_t>(n);
          ++m_counters.writes;
        } else if (!(n < 0 && errno == EINTR)) {
          break;  // full (EAGAIN) or failed: the I/O thread writes the rest or sees the error
        }
      }
      if (written == bytes.size()) return;
      bytes.erase(0, written);
    }
    ++lane->queued;
    MutexLock outbox_lock(&m_outbox_mutex);
    m_outbox.push_back({conn_id, std::move(bytes), close_after});
  }
  wake();
}

void ConnectionHub::run(const std::function<bool()>& should_stop,
                        const std::function<void()>& on_tick) {
  m_io_thread = std::this_thread::get_id();
  auto next_tick = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (!should_stop()) {
    // A failed wait is a pass with no events, as an interrupted one.
    std::span<const EventLoop::Event> events =
        m_loop->wait(250).value_or(std::span<const EventLoop::Event>());
    // One event and no wake-up: a wake-up means other threads' frames wait in
    // the outbox, to be written after this pass.
    m_quiet = events.size() == 1 && events[0].tag != EventLoop::kWakeTag;
    for (const EventLoop::Event& event : events) {
      if (event.tag == kListenTag) {
        accept_all();
      } else if (event.tag != EventLoop::kWakeTag) {  // a wake-up only ends the wait
        auto it = m_conns.find(event.tag);
        if (it == m_conns.end()) continue;
        Connection& conn = *it->second;
        if (event.events & EPOLLOUT) write_some(conn);
        if (m_conns.count(event.tag) &&
            (event.events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP))) {
          handle_readable(conn);
        }
      }
    }
    m_quiet = false;
    drain_outbox();
    if (std::chrono::steady_clock::now() >= next_tick) {
      next_tick = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      on_tick();
    }
  }
}

void ConnectionHub::accept_all() {
  for (;;) {
    int fd = ::accept4(m_listen_fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN or a transient error: epoll tells us again
    m_last_activity_ns = now_ns();
    auto peer = ipc::peer_credentials(fd);
    if (!peer) {
      refuse(fd, ErrorCode::kProtocol, "cannot read peer credentials: " + peer.error().message);
      continue;
    }
    if (peer->uid != ::geteuid()) {
      ++m_counters.refused_peers;
      spdlog::warn("refused connection from pid {} uid {}: the service belongs to uid {}",
                   peer->pid, peer->uid, ::geteuid());
      refuse(fd, ErrorCode::kPermission,
             "connection refused: this ccpool service belongs to uid " +
                 std::to_string(::geteuid()) + ", you are uid " + std::to_string(peer->uid) +
                 "; start your own with 'ccpool serve' or set CCPOOL_SOCKET");
      continue;
    }
    if (m_conns.size() >= kMaxConnections) {
      refuse(fd, ErrorCode::kFull,
             "too many connections (" + std::to_string(kMaxConnections) + ")");
      continue;
    }
    auto conn = std::make_unique<Connection>();
    conn->id = m_next_conn_id++;
    conn->fd = UniqueFd(fd);
    conn->lane = std::make_shared<Lane>();
    {
      MutexLock lock(&conn->lane->mutex);
      conn->lane->fd = fd;
    }
    conn->peer = *peer;
    [[maybe_unused]] auto watched = m_loop->watch(fd, EPOLLIN | EPOLLRDHUP, conn->id);
    ++m_counters.accepted;
    {
      MutexLock lock(&m_lanes_mutex);
      m_lanes.emplace(conn->id, conn->lane);
    }
    m_conns.emplace(conn->id, std::move(conn));
    m_connection_count = m_conns.size();
  }
}

void ConnectionHub::refuse(int fd, ErrorCode code, const std::string& message) {
  std::string bytes = ipc::encode(ipc::ErrorFrame{static_cast<uint16_t>(code), message});
  [[maybe_unused]] ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::close(fd);
}

void ConnectionHub::handle_readable(Connection& conn) {
  char buf[64 * 1024];
  uint64_t id = conn.id;
  for (;;) {
    ssize_t n = recv_with_fds(conn.fd.get(), buf, sizeof buf, conn.passed_fds);
    if (conn.passed_fds.size() > kMaxPassedFds) {
      ++m_counters.protocol_errors;
      conn.passed_fds.clear();
      queue_bytes(conn,
                  ipc::encode(ipc::ErrorFrame{static_cast<uint16_t>(ErrorCode::kProtocol),
                                              "too many file descriptors passed"}),
                  true);
      return;
    }
    if (n > 0) {
      m_last_activity_ns = now_ns();
      if (conn.closing) continue;  // discard input after an error
      conn.reader.feed(buf, static_cast<size_t>(n));
      conn.reading = true;
      for (;;) {
        auto next = conn.reader.next();
        if (!next) {
          ++m_counters.protocol_errors;
          spdlog::warn("protocol error from pid {}: {}", conn.peer.pid, next.error().message);
          queue_bytes(conn,
                      ipc::encode(ipc::ErrorFrame{static_cast<uint16_t>(ErrorCode::kProtocol),
                                                  next.error().message}),
                      true);
          break;
        }
        if (!*next) break;
        handle_frame(conn, std::move(**next));
        if (!m_conns.count(id) || conn.closing) break;
      }
      if (!m_conns.count(id)) return;
      conn.reading = false;
      // What the frames of this read answered, in one write.
      if (conn.out_pos < conn.out.size()) write_some(conn);
      if (!m_conns.count(id)) return;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    close_connection(id);  // EOF or error
    return;
  }
}

void ConnectionHub::handle_frame(Connection& conn, ipc::Message message) {
  if (!conn.greeted) {
    auto* hello = std::get_if<ipc::Hello>(&message);
    if (hello == nullptr) {
      ++m_counters.protocol_errors;
      queue_bytes(conn,
                  ipc::encode(ipc::ErrorFrame{static_cast<uint16_t>(ErrorCode::kProtocol),
                                              "expected a Hello frame first"}),
                  true);
      return;
    }
    if (auto checked = ipc::check_hello(*hello); !checked) {
      ++m_counters.protocol_errors;
      queue_bytes(conn, ipc::encode(ipc::to_error_frame(checked.error())), true);
      return;
    }
    // Descriptors that came with hello stay for the first request: clients
    // send hello and exec (with its stdin) in one write (PROTOCOL.md).
    conn.greeted = true;
    queue_bytes(conn, ipc::encode(ipc::HelloOk{ipc::kProtocolVersion, 0, ::getpid()}), false, false,
                false);
    return;
  }
  // Only an exec frame may carry a descriptor (its stdin); any other is dropped.
  UniqueFd passed;
  if (std::holds_alternative<ipc::ExecRequest>(message) && !conn.passed_fds.empty()) {
    passed = std::move(conn.passed_fds.front());
    conn.passed_fds.pop_front();
  }
  conn.passed_fds.clear();
  m_callbacks.on_message(conn.id, conn.peer, std::move(message), std::move(passed));
}

void ConnectionHub::queue_bytes(Connection& conn, std::string bytes, bool close_after,
                                bool from_outbox, bool write_now) {
  MutexLock lock(&conn.lane->mutex);  // one step with the count, so send() cannot pass these bytes
  if (from_outbox && conn.lane->queued > 0) --conn.lane->queued;
  if (conn.out_pos == conn.out.size()) {
    conn.out.clear();
    conn.out_pos = 0;
  }
  conn.out += bytes;
  conn.lane->backlog = true;
  if (close_after) conn.closing = true;
  lock.unlock();
  if (write_now) write_some(conn);
}

void ConnectionHub::write_some(Connection& conn) {
  MutexLock lock(&conn.lane->mutex);
  int error = 0;
  while (conn.out_pos < conn.out.size()) {
    ssize_t n = ::send(conn.fd.get(), conn.out.data() + conn.out_pos,
                       conn.out.size() - conn.out_pos, MSG_NOSIGNAL);
    if (n > 0) {
      conn.out_pos += static_cast<size_t>(n);
      ++m_counters.writes;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    error = n < 0 ? errno : EPIPE;
    break;
  }
  conn.lane->backlog = conn.out_pos < conn.out.size();
  lock.unlock();
  if (error != 0) {
    if (error == EAGAIN) {
      if (!conn.want_out) {
        [[maybe_unused]] auto watched =
            m_loop->rewatch(conn.fd.get(), EPOLLIN | EPOLLRDHUP | EPOLLOUT, conn.id);
        conn.want_out = true;
      }
      return;
    }
    close_connection(conn.id);  // peer gone
    return;
  }
  if (conn.want_out) {
    [[maybe_unused]] auto watched = m_loop->rewatch(conn.fd.get(), EPOLLIN | EPOLLRDHUP, conn.id);
    conn.want_out = false;
  }
  if (conn.closing) close_connection(conn.id);
}

void ConnectionHub::close_connection(uint64_t conn_id) {
  auto it = m_conns.find(conn_id);
  if (it == m_conns.end()) return;
  m_loop->unwatch(it->second->fd.get());
  {
    // No send() uses the descriptor after this, so closing it below cannot
    // make a reply land on a reused descriptor number.
    MutexLock lock(&it->second->lane->mutex);
    it->second->lane->fd = -1;
  }
  {
    MutexLock lock(&m_lanes_mutex);
    m_lanes.erase(conn_id);
  }
  m_conns.erase(it);
  m_connection_count = m_conns.size();
  m_callbacks.on_disconnect(conn_id);
}

void ConnectionHub::drain_outbox() {
  std::deque<Outgoing> batch;
  {
    MutexLock lock(&m_outbox_mutex);
    batch.swap(m_outbox);
  }
  for (auto& item : batch) {
    auto it = m_conns.find(item.conn_id);
    if (it == m_conns.end()) continue;
    queue_bytes(*it->second, std::move(item.bytes), item.close_after, true);
  }
}

void ConnectionHub::flush_pending(std::chrono::milliseconds budget) {
  auto until = std::chrono::steady_clock::now() + budget;
  drain_outbox();
  while (std::chrono::steady_clock::now() < until) {
    bool pending = false;
    for (auto& [id, conn] : m_conns) pending |= conn->out_pos < conn->out.size();
    if (!pending) return;
    auto events = m_loop->wait(20);
    if (!events) continue;
    for (const EventLoop::Event& event : *events) {
      auto it = m_conns.find(event.tag);
      if (it != m_conns.end() && (event.events & EPOLLOUT)) write_some(*it->second);
    }
  }
}

}  // namespace ccpool::service
