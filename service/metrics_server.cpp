#include "service/metrics_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "resp/peer.h"

namespace ccpool::service {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kDrainMs = 1000;
constexpr uint64_t kListenTag = 0;  // connection ids start at 1

std::string http_reply(std::string_view status, std::string_view type, const std::string& body,
                       bool head_only) {
  std::string out = "HTTP/1.1 " + std::string(status) + "\r\n";
  out += "Content-Type: " + std::string(type) + "\r\n";
  out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  out += "Connection: close\r\n\r\n";
  if (!head_only) out += body;
  return out;
}

std::string plain(std::string_view status, const std::string& text) {
  return http_reply(status, "text/plain; charset=utf-8", text + "\n", false);
}

bool iequals_prefix(std::string_view line, std::string_view name) {
  if (line.size() < name.size()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(line[i])) != name[i]) return false;
  }
  return true;
}

struct Connection {
  UniqueFd fd;
  std::string in;
  std::string out;
  size_t sent = 0;
  bool replying = false;
  // Reply sent and our side shut down: read and discard until the peer
  // closes, so unread request bytes never turn the close into a reset that
  // destroys the reply in flight.
  bool draining = false;
  Clock::time_point deadline;
  uid_t uid = 0;
  uint64_t id = 0;       // its tag in the event loop
  uint32_t watched = 0;  // what the loop watches for it now (0: not yet)
  uint32_t revents = 0;  // what the last wait reported for it
};

void close_connection(EventLoop& loop, Connection& c) {
  loop.unwatch(c.fd.get());
  c.fd.reset();
}

void send_busy(int fd, uid_t uid) {
  std::string busy =
      plain("503 Service Unavailable", "uid " + std::to_string(uid) + " has " +
                                           std::to_string(MetricsServer::kMaxPerUid) +
                                           " connections open here already");
  [[maybe_unused]] ssize_t n = ::send(fd, busy.data(), busy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

// One more connection of `uid` may open: below its kMaxPerUid, or by closing
// (503) its oldest connection still waiting for a request. false: every one
// of its connections is being answered.
bool make_room_for(EventLoop& loop, std::vector<Connection>& conns, uid_t uid) {
  size_t open = 0;
  Connection* oldest_idle = nullptr;
  for (Connection& c : conns) {
    if (c.uid != uid || !c.fd) continue;
    ++open;
    if (!c.replying && (!oldest_idle || c.deadline < oldest_idle->deadline)) oldest_idle = &c;
  }
  if (open < MetricsServer::kMaxPerUid) return true;
  if (!oldest_idle) return false;
  send_busy(oldest_idle->fd.get(), uid);
  close_connection(loop, *oldest_idle);
  std::erase_if(conns, [](const Connection& c) { return !c.fd; });
  return true;
}

}  // namespace

std::string metrics_reply(std::string_view head, const MetricsServer::Render& render) {
  size_t eol = head.find("\r\n");
  std::string_view request_line = head.substr(0, eol);
  size_t sp1 = request_line.find(' ');
  size_t sp2 = sp1 == std::string_view::npos ? sp1 : request_line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || !request_line.substr(sp2 + 1).starts_with("HTTP/1.")) {
    return plain("400 Bad Request", "malformed request line");
  }
  std::string_view method = request_line.substr(0, sp1);
  std::string_view target = request_line.substr(sp1 + 1, sp2 - sp1 - 1);
  target = target.substr(0, target.find('?'));
  if (target != "/metrics") return plain("404 Not Found", "ccpool serves only /metrics");
  if (method != "GET" && method != "HEAD") {
    return plain("405 Method Not Allowed", "use GET or HEAD");
  }
  std::string_view accept;
  size_t pos = eol == std::string_view::npos ? head.size() : eol + 2;
  while (pos < head.size()) {
    size_t end = head.find("\r\n", pos);
    std::string_view line = head.substr(pos, end == std::string_view::npos ? head.npos : end - pos);
    if (iequals_prefix(line, "accept:")) accept = line.substr(7);
    if (end == std::string_view::npos) break;
    pos = end + 2;
  }
  MetricsFormat format = format_for_accept(accept);
  return http_reply("200 OK", content_type(format), render(format), method == "HEAD");
}

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(int port, Render render) {
  if (port < 0 || port > 65535) {
    return make_error(ErrorCode::kInvalidArgument, "invalid metrics port " + std::to_string(port) +
                                                       "; use 1-65535 (0: any free port)");
  }
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return make_error(ErrorCode::kIo, std::string("socket: ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(fd.get(), 64) != 0) {
    return make_error(ErrorCode::kIo, "cannot listen on 127.0.0.1:" + std::to_string(port) +
                                          " for metrics: " + std::strerror(errno) +
                                          "; pick another --metrics-port");
  }
  socklen_t len = sizeof addr;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len);
  CCPOOL_TRY_ASSIGN(std::unique_ptr<EventLoop> loop, EventLoop::create());
  return std::unique_ptr<MetricsServer>(
      new MetricsServer(std::move(fd), std::move(loop), ntohs(addr.sin_port), std::move(render)));
}

MetricsServer::MetricsServer(UniqueFd listen_fd, std::unique_ptr<EventLoop> loop, int port,
                             Render render)
    : m_listen_fd(std::move(listen_fd)),
      m_loop(std::move(loop)),
      m_port(port),
      m_render(std::move(render)) {
  m_thread = std::thread([this] { run(); });
}

MetricsServer::~MetricsServer() {
  m_loop->wake();
  if (m_thread.joinable()) m_thread.join();
}

void MetricsServer::run() {
  std::vector<Connection> conns;
  uint64_t next_id = kListenTag + 1;
  bool listening = false;
  for (;;) {
    auto now = Clock::now();
    // At the bound, new connections wait in the kernel's backlog.
    if (listening != (conns.size() < kMaxConnections)) {
      listening = !listening;
      if (listening) {
        [[maybe_unused]] auto watched = m_loop->watch(m_listen_fd.get(), EPOLLIN, kListenTag);
      } else {
        m_loop->unwatch(m_listen_fd.get());
      }
    }
    int timeout_ms = -1;
    for (Connection& c : conns) {
      uint32_t want = c.replying && !c.draining ? EPOLLOUT : EPOLLIN;
      if (want != c.watched) {
        [[maybe_unused]] auto watched = c.watched == 0 ? m_loop->watch(c.fd.get(), want, c.id)
                                                       : m_loop->rewatch(c.fd.get(), want, c.id);
        c.watched = want;
      }
      c.revents = 0;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(c.deadline - now).count();
      int ms = left < 0 ? 0 : static_cast<int>(left) + 1;
      timeout_ms = timeout_ms < 0 ? ms : std::min(timeout_ms, ms);
    }
    auto events = m_loop->wait(timeout_ms);
    if (!events) {
      spdlog::error("metrics: {}; the metrics endpoint stops", events.error().message);
      return;
    }
    uint32_t listener_events = 0;
    for (const EventLoop::Event& event : *events) {
      if (event.tag == EventLoop::kWakeTag) return;
      if (event.tag == kListenTag) listener_events = event.events;
      for (Connection& c : conns) {
        if (c.id == event.tag) c.revents = event.events;
      }
    }
    now = Clock::now();
    for (Connection& c : conns) {
      uint32_t ev = c.revents;
      bool done = false;
      if (c.draining && (ev & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
        char buf[4096];
        ssize_t n = ::recv(c.fd.get(), buf, sizeof buf, MSG_DONTWAIT);
        done = n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR);
      } else if (!c.replying && (ev & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
        char buf[2048];
        ssize_t n = ::recv(c.fd.get(), buf, sizeof buf, MSG_DONTWAIT);
        if (n <= 0) {
          done = n == 0 || (errno != EAGAIN && errno != EINTR);
        } else {
          c.in.append(buf, static_cast<size_t>(n));
          size_t end = c.in.find("\r\n\r\n");
          if (end != std::string::npos && end + 4 <= kMaxRequestBytes) {
            c.out = metrics_reply(std::string_view(c.in).substr(0, end + 2), m_render);
            c.replying = true;
          } else if (end != std::string::npos || c.in.size() > kMaxRequestBytes) {
            c.out = plain("431 Request Header Fields Too Large", "request over 8 KiB");
            c.replying = true;
          }
        }
      } else if (c.replying && (ev & (EPOLLOUT | EPOLLHUP | EPOLLERR))) {
        ssize_t n = ::send(c.fd.get(), c.out.data() + c.sent, c.out.size() - c.sent,
                           MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) c.sent += static_cast<size_t>(n);
        done = n < 0 && errno != EAGAIN && errno != EINTR;
        if (c.sent == c.out.size()) {
          ::shutdown(c.fd.get(), SHUT_WR);
          c.draining = true;
          c.deadline = std::min(c.deadline, now + std::chrono::milliseconds(kDrainMs));
        }
      }
      if (done || now >= c.deadline) close_connection(*m_loop, c);
    }
    std::erase_if(conns, [](const Connection& c) { return !c.fd; });
    if (listener_events & EPOLLIN) {
      while (conns.size() < kMaxConnections) {
        int fd = ::accept4(m_listen_fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        UniqueFd accepted(fd);
        auto uid = resp::tcp_peer_uid(fd);
        if (!uid) continue;  // gone already, or unknowable: not worth a slot
        if (!make_room_for(*m_loop, conns, *uid)) {
          send_busy(fd, *uid);
          continue;
        }
        Connection c;
        c.fd = std::move(accepted);
        c.uid = *uid;
        c.id = next_id++;
        c.deadline = Clock::now() + std::chrono::milliseconds(kIoTimeoutMs);
        conns.push_back(std::move(c));
      }
    }
  }
}

}  // namespace ccpool::service
