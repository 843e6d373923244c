// Level-triggered epoll loop. Per connection: read what arrived (bounded per
// wakeup), parse and execute every complete command, queue replies, write what
// the socket takes. While more than kOutHighWater bytes of replies (and of
// SET values in flight) wait, the loop neither reads nor executes for that
// connection, so a client that pipelines without reading cannot grow our
// memory without bound.
//
// Deferred replies: a plain SET goes to KvBackend::set_async and its reply
// waits for the backend's completion (for the service: its batch committed);
// a CCPOOL.LEASE that must wait for another client's SET waits likewise
// (lease_table.h). Replies keep command order: what later commands answer is
// queued behind the waiting one. A command other than a deferrable SET is
// held, unexecuted, until every reply before it is answered, so it reads what
// those SETs wrote. Completions arrive from other threads through Completions
// and an eventfd. A closed connection gives up the leases it held.
#include "resp/io_loop.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstring>
#include <deque>
#include <optional>
#include <unordered_set>
#include <vector>

#include "base/thread_annotations.h"
#include "base/unix_socket.h"
#include "resp/peer.h"
#include "resp/reply.h"

namespace ccpool::resp {
namespace {

constexpr size_t kReadChunk = 64 * 1024;
constexpr size_t kReadBudget = 1 << 20;  // per connection per wakeup, for fairness
constexpr size_t kOutHighWater = 4 << 20;
constexpr size_t kOutKeepCapacity = 1 << 20;  // shrink a drained reply buffer above this
constexpr size_t kDeferredOverhead = 64;      // backlog charged per waiting SET besides its value

void send_best_effort(int fd, std::string_view text) {
  [[maybe_unused]] ssize_t n = send(fd, text.data(), text.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// At most one warning per kWarnEveryMs for the whole process: a page that
// keeps posting must not fill the log.
constexpr int64_t kWarnEveryMs = 10'000;
std::atomic<int64_t> g_last_cross_protocol_warning{INT64_MIN / 2};

void warn_cross_protocol(const SharedState& shared, std::string_view first_word, bool tcp) {
  int64_t now = unix_now_ms();
  int64_t last = g_last_cross_protocol_warning.load();
  if (now - last < kWarnEveryMs ||
      !g_last_cross_protocol_warning.compare_exchange_strong(last, now))
    return;
  std::string word(first_word.substr(0, 16));
  for (char& c : word) c = std::isprint(static_cast<unsigned char>(c)) ? c : '?';
  spdlog::warn(
      "resp: closed a {} connection that began '{}' without running it: possible cross-protocol "
      "attack "
      "(an HTTP request from a browser or an SSRF); {} such connection(s) so far",
      tcp ? "TCP" : "Unix-socket", word, shared.cross_protocol.load());
}

}  // namespace

struct Completions {
  struct Done {
    int fd;
    uint64_t serial, seq;
    std::string reply;
  };
  // Any thread. Wakes the loop when the list was empty (the loop drains all).
  void post(Done done) {
    bool first;
    {
      MutexLock lock(&mutex);
      first = list.empty();
      list.push_back(std::move(done));
    }
    uint64_t one = 1;
    if (first) {
      [[maybe_unused]] ssize_t n = write(event.get(), &one, sizeof(one));
    }
  }
  std::vector<Done> take() {
    uint64_t count;
    [[maybe_unused]] ssize_t n =
        read(event.get(), &count, sizeof(count));  // before the swap: see post()
    MutexLock lock(&mutex);
    std::vector<Done> out;
    out.swap(list);
    return out;
  }

  UniqueFd event;  // eventfd the loop watches
  Mutex mutex;
  std::vector<Done> list GUARDED_BY(mutex);
};

// A command whose reply comes later (a SET sent to the backend, a lease
// wait), with the replies of the commands after it that must follow its reply.
struct Waiting {
  bool done = false;
  bool stores = false;  // a SET the backend has not completed while !done
  std::string reply;    // once done
  size_t charge = 0;    // backlog bytes: value + overhead
  std::string after;
};

struct Connection {
  Connection(UniqueFd f, SharedState& shared, const LoopConfig& config, uint64_t serial_number)
      : fd(std::move(f)),
        parser(static_cast<size_t>(config.max_value), config.max_args),
        session(shared),
        serial(serial_number) {}

  size_t pending() const { return out.size() - out_pos; }
  size_t backlog() const { return pending() + deferred_bytes; }
  bool answered() const { return pending() == 0 && waiting.empty() && !held; }

  UniqueFd fd;
  RespParser parser;
  Session session;
  std::string out;  // replies not yet written, from out_pos
  size_t out_pos = 0;
  bool pre_auth = false;  // counted in SharedState::unauthenticated, small parser bounds
  bool tcp = false;       // accepted on the TCP listener
  bool spoke_resp =
      false;  // sent a well-formed RESP array command (TCP: inline allowed from then on)
  bool read_eof = false;
  bool leases_released = false;  // at read_eof, once no SET of its own is in flight
  bool closing = false;          // QUIT or a protocol error: write what is queued, then close
  uint32_t events = 0;           // what epoll watches now
  const uint64_t serial;
  std::deque<Waiting> waiting;  // in command order; references stay valid on push_back
  uint64_t first_seq = 0;       // sequence number of waiting.front()
  size_t deferred_bytes = 0;    // charges of `waiting` plus their `after` bytes
  std::optional<std::vector<std::string>> held;  // waits for `waiting` to drain
};

IoLoop::IoLoop(SharedState& shared, const LoopConfig& config)
    : m_shared(shared),
      m_config(config),
      m_completions(std::make_shared<Completions>()),
      m_read_buffer(new char[kReadChunk]) {}

IoLoop::~IoLoop() {
  if (m_thread.joinable()) {
    m_loop->wake();
    m_thread.join();
  }
  m_shared.connected.fetch_sub(m_connections.size());
  for (auto& [fd, conn] : m_connections) {
    if (conn->pre_auth) m_shared.unauthenticated.fetch_sub(1);
  }
}

Result<void> IoLoop::start() {
  CCPOOL_TRY_ASSIGN(m_loop, EventLoop::create());
  m_completions->event.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!m_completions->event) {
    return make_error(ErrorCode::kIo, std::string("epoll/eventfd: ") + std::strerror(errno));
  }
  auto watch = [&](int fd, uint32_t events) {
    return m_loop->watch(fd, events, static_cast<uint64_t>(fd));
  };
  CCPOOL_TRY(watch(m_completions->event.get(), EPOLLIN));
  if (m_config.unix_listener >= 0)
    CCPOOL_TRY(watch(m_config.unix_listener, EPOLLIN | EPOLLEXCLUSIVE));
  if (m_config.tcp_listener >= 0)
    CCPOOL_TRY(watch(m_config.tcp_listener, EPOLLIN | EPOLLEXCLUSIVE));
  m_thread = std::thread([this] { run(); });
  return ok();
}

void IoLoop::run() {
  pthread_setname_np(pthread_self(), "ccpool-resp");
  while (true) {
    auto events = m_loop->wait(-1);
    if (!events) return;
    for (const EventLoop::Event& event : *events) {
      if (event.tag == EventLoop::kWakeTag) return;
      int fd = static_cast<int>(event.tag);
      if (fd == m_completions->event.get()) {
        on_completions();
        continue;
      }
      if (fd == m_config.unix_listener || fd == m_config.tcp_listener) {
        accept_from(fd);
        continue;
      }
      auto it = m_connections.find(fd);
      if (it != m_connections.end()) on_event(*it->second, event.events);
    }
    // Every ready socket was served: the SETs of this pass need not wait for
    // company that would only arrive after their replies.
    if (m_deferred_in_pass) {
      m_deferred_in_pass = false;
      m_shared.backend.end_of_burst();
    }
  }
}

void IoLoop::accept_from(int listener) {
  while (true) {
    int fd = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN: another loop took it; EMFILE and friends: try on the next wakeup
    UniqueFd owned(fd);
    if (!admit(fd, listener == m_config.unix_listener)) continue;
    if (listener == m_config.tcp_listener) {
      // Replies are small and complete: send each at once, as redis-server does
      // (Nagle would hold one back while an earlier segment is unacknowledged).
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    auto conn = std::make_unique<Connection>(std::move(owned), m_shared, m_config, m_next_serial++);
    conn->tcp = listener == m_config.tcp_listener;
    Connection* raw = conn.get();
    conn->session.set_deferral(
        [this, raw](size_t value_bytes, bool stores) { return defer(*raw, value_bytes, stores); });
    if (!conn->session.authenticated()) {
      if (m_shared.unauthenticated.fetch_add(1) >= m_config.max_unauthenticated) {
        m_shared.unauthenticated.fetch_sub(1);
        m_shared.refused_peers.fetch_add(1);
        send_best_effort(fd, "-ERR max number of unauthenticated clients reached\r\n");
        continue;
      }
      conn->pre_auth = true;
      conn->parser.set_limits(kPreAuthMaxBytes, kPreAuthMaxArgs, kPreAuthMaxBytes);
    }
    conn->events = EPOLLIN;
    if (!m_loop->watch(fd, EPOLLIN, static_cast<uint64_t>(fd))) {
      if (conn->pre_auth) m_shared.unauthenticated.fetch_sub(1);
      continue;
    }
    m_shared.connected.fetch_add(1);
    m_shared.connections.fetch_add(1);
    m_connections.emplace(fd, std::move(conn));
  }
}

// Same uid: admitted. Another uid: refused, except on TCP when a password is
// configured (the session then answers only AUTH until it is given).
bool IoLoop::admit(int fd, bool is_unix) {
  if (m_shared.connected.load() >= m_config.max_connections) {
    m_shared.refused_peers.fetch_add(1);
    send_best_effort(fd, "-ERR max number of clients reached\r\n");
    return false;
  }
  Result<uid_t> uid = is_unix ? peer_credentials(fd).map([](const PeerCred& c) { return c.uid; })
                              : tcp_peer_uid(fd);
  if (uid && *uid == geteuid()) return true;
  if (!is_unix && !m_shared.password.empty()) return true;
  m_shared.refused_peers.fetch_add(1);
  std::string why =
      uid ? "peer uid " + std::to_string(*uid) : "unknown peer (" + uid.error().message + ")";
  send_best_effort(fd, "-ERR ccpool front serves uid " + std::to_string(geteuid()) +
                           " only; refused " + why + "\r\n");
  return false;
}

void IoLoop::on_event(Connection& conn, uint32_t events) {
  bool healthy = true;
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) healthy = read_some(conn);
  if (healthy) healthy = flush(conn);
  // Run commands left waiting behind the high-water mark while the socket
  // keeps taking replies; stop when the parser needs bytes or the socket is full.
  bool more = true;
  while (healthy && more && conn.backlog() < kOutHighWater) {
    more = process(conn);
    healthy = flush(conn);
  }
  if (!healthy) return close_connection(conn.fd.get());
  update(conn);
}

bool IoLoop::read_some(Connection& conn) {
  size_t budget = kReadBudget;
  while (budget > 0 && !conn.closing && !conn.read_eof && !conn.held &&
         conn.backlog() < kOutHighWater) {
    ssize_t n = recv(conn.fd.get(), m_read_buffer.get(), kReadChunk, 0);
    if (n > 0) {
      conn.parser.feed(std::string_view(m_read_buffer.get(), static_cast<size_t>(n)));
      budget -= std::min(budget, static_cast<size_t>(n));
      process(conn);
      // Before AUTH a client may not make us hold more than one small request.
      if (conn.pre_auth && !conn.closing && conn.parser.buffered() > kPreAuthMaxBytes) {
        reply::error(conn.out, "ERR Protocol error: unauthenticated request too large");
        m_shared.protocol_errors.fetch_add(1);
        conn.closing = true;
      }
      // A short read drained the socket: skip the recv that would only say
      // EAGAIN (level-triggered epoll reports what arrives later).
      if (static_cast<size_t>(n) < kReadChunk) break;
    } else if (n == 0) {
      conn.read_eof = true;  // update() ends its leases
    } else if (errno == EINTR) {
      continue;
    } else {
      return errno == EAGAIN || errno == EWOULDBLOCK;
    }
  }
  return true;
}

bool IoLoop::process(Connection& conn) {
  while (!conn.closing) {
    if (conn.backlog() >= kOutHighWater) return true;
    // Replies go behind the last waiting SET, if any.
    std::string& sink = conn.waiting.empty() ? conn.out : conn.waiting.back().after;
    size_t before = sink.size();
    std::vector<std::string> argv;
    if (conn.held) {
      if (!conn.waiting.empty()) return false;  // deliver() resumes it
      argv = std::move(*conn.held);
      conn.held.reset();
    } else {
      auto next = conn.parser.next();
      if (!next) {
        if (next.error().code == ErrorCode::kFull && !conn.pre_auth) {
          reply::error(sink, "ERR value too large");
        } else {
          reply::error(sink, "ERR " + next.error().message);
          m_shared.protocol_errors.fetch_add(1);
          conn.closing = true;
        }
      } else if (!*next) {
        return false;
      } else if (refuse_cross_protocol(conn, **next, sink)) {
        conn.closing = true;
      } else if (!conn.waiting.empty() && !Session::may_defer(**next)) {
        conn.held = std::move(**next);
        return false;
      } else {
        argv = std::move(**next);
      }
    }
    if (!argv.empty()) conn.session.execute(argv, sink);
    if (&sink != &conn.out) conn.deferred_bytes += sink.size() - before;
    if (conn.pre_auth && conn.session.authenticated()) leave_pre_auth(conn);
    if (conn.session.quit_requested()) conn.closing = true;
  }
  return false;
}

// The cross-protocol guard: bytes that are not a Redis client's. An HTTP
// request's first two lines are "POST ..." (or another method) and "Host:
// ...": redis-server closes a connection whose command is POST or Host: with
// no reply, and so does the front, on both listeners. That alone misses
// other methods without a Host header (HTTP/1.0), so on TCP, where a browser
// or an SSRF can reach the port, an inline command before the connection's
// first RESP array is refused too: Redis clients send arrays, and a
// cross-protocol sender cannot make its first line one. (A password on TCP
// would not do: Triton's Redis settings carry no password.) true: close.
bool IoLoop::refuse_cross_protocol(Connection& conn, const std::vector<std::string>& argv,
                                   std::string& sink) {
  bool http = iequals(argv[0], "post") || iequals(argv[0], "host:");
  bool inline_first = conn.tcp && !conn.spoke_resp && conn.parser.last_was_inline();
  if (!http && !inline_first) {
    if (!conn.parser.last_was_inline()) conn.spoke_resp = true;
    return false;
  }
  if (!http) {
    reply::error(
        sink,
        "ERR ccpool front: on TCP the first command must be a RESP array (a Redis client's); "
        "inline text first is refused as a possible cross-protocol request (docs/resp-front.md)");
  }
  m_shared.cross_protocol.fetch_add(1);
  warn_cross_protocol(m_shared, argv[0], conn.tcp);
  return true;
}

// Called by Session while it executes a deferrable SET on this loop's thread.
Session::ReplyLater IoLoop::defer(Connection& conn, size_t value_bytes, bool stores) {
  uint64_t seq = conn.first_seq + conn.waiting.size();
  m_deferred_in_pass = true;
  Waiting waiting;
  waiting.stores = stores;
  waiting.charge = value_bytes + kDeferredOverhead;
  conn.deferred_bytes += waiting.charge;
  conn.waiting.push_back(std::move(waiting));
  return [completions = m_completions, fd = conn.fd.get(), serial = conn.serial,
          seq](std::string reply) {
    completions->post({fd, serial, seq, std::move(reply)});
  };
}

void IoLoop::on_completions() {
  std::unordered_set<int> touched;
  for (Completions::Done& done : m_completions->take()) {
    auto it = m_connections.find(done.fd);
    if (it == m_connections.end() || it->second->serial != done.serial)
      continue;  // closed meanwhile
    Connection& conn = *it->second;
    if (done.seq < conn.first_seq || done.seq - conn.first_seq >= conn.waiting.size()) continue;
    Waiting& waiting = conn.waiting[done.seq - conn.first_seq];
    waiting.done = true;
    waiting.reply = std::move(done.reply);
    touched.insert(done.fd);
  }
  for (int fd : touched) {
    auto it = m_connections.find(fd);
    if (it == m_connections.end()) continue;
    deliver(*it->second);
    on_event(*it->second, 0);  // write, resume held or stopped commands, re-arm
  }
}

void IoLoop::deliver(Connection& conn) {
  while (!conn.waiting.empty() && conn.waiting.front().done) {
    Waiting& front = conn.waiting.front();
    conn.out += front.reply;
    conn.out += front.after;
    conn.deferred_bytes -= front.charge + front.after.size();
    conn.waiting.pop_front();
    ++conn.first_seq;
  }
}

bool IoLoop::flush(Connection& conn) {
  while (conn.pending() > 0) {
    ssize_t n = send(conn.fd.get(), conn.out.data() + conn.out_pos, conn.pending(), MSG_NOSIGNAL);
    if (n > 0) {
      conn.out_pos += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
  }
  conn.out.clear();
  conn.out_pos = 0;
  if (conn.out.capacity() > kOutKeepCapacity) conn.out.shrink_to_fit();
  return true;
}

void IoLoop::update(Connection& conn) {
  // A client that sends nothing more can neither SET nor release what it
  // leads: its leases end once the SETs it sent have landed (each hands its
  // value to the key's waiters), not when the replies it is still owed (a
  // wait of its own, up to the wait's bound) are written.
  if (conn.read_eof && !conn.leases_released &&
      std::none_of(conn.waiting.begin(), conn.waiting.end(),
                   [](const Waiting& w) { return w.stores && !w.done; })) {
    m_shared.leases.release_all(conn.session.id());
    conn.leases_released = true;
  }
  if ((conn.closing || conn.read_eof) && conn.answered()) return close_connection(conn.fd.get());
  uint32_t want = 0;
  if (conn.pending() > 0) want |= EPOLLOUT;
  if (!conn.closing && !conn.read_eof && !conn.held && conn.backlog() < kOutHighWater)
    want |= EPOLLIN;
  if (want == conn.events) return;
  if (!m_loop->rewatch(conn.fd.get(), want, static_cast<uint64_t>(conn.fd.get()))) {
    return close_connection(conn.fd.get());
  }
  conn.events = want;
}

void IoLoop::leave_pre_auth(Connection& conn) {
  conn.pre_auth = false;
  m_shared.unauthenticated.fetch_sub(1);
  conn.parser.set_limits(static_cast<size_t>(m_config.max_value), m_config.max_args,
                         m_config.max_value + (1u << 20));
}

void IoLoop::close_connection(int fd) {
  m_loop->unwatch(fd);
  auto it = m_connections.find(fd);
  if (it == m_connections.end()) return;
  if (it->second->pre_auth) m_shared.unauthenticated.fetch_sub(1);
  m_shared.leases.release_all(it->second->session.id());
  m_connections.erase(it);
  m_shared.connected.fetch_sub(1);
}

}  // namespace ccpool::resp
