// Front: binds the listeners and runs the I/O loops. Ownership: the Front owns
// the listening sockets, the SharedState and the loops; each loop owns its
// connections; the KvBackend belongs to the caller and must outlive the Front.
#include "resp/front.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/fs.h"
#include "base/unix_socket.h"
#include "resp/io_loop.h"
#include "resp/lease_table.h"
#include "resp/session.h"

namespace ccpool::resp {
namespace {

constexpr int kBacklog = 511;

Result<UniqueFd> listen_loopback(int port, int& bound_port) {
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return make_error(ErrorCode::kIo, "socket(AF_INET): " + errno_text(errno));
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port < 0 ? 0 : port));
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return make_error(ErrorCode::kIo, "bind 127.0.0.1:" + std::to_string(port) + ": " +
                                          errno_text(errno) + " (choose another --resp-port)");
  }
  if (listen(fd.get(), kBacklog) != 0)
    return make_error(ErrorCode::kIo, "listen on TCP: " + errno_text(errno));
  socklen_t len = sizeof(addr);
  getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len);
  bound_port = ntohs(addr.sin_port);
  return fd;
}

}  // namespace

class Front::Impl {
 public:
  Impl(const FrontOptions& options, KvBackend& backend)
      : m_options(options), m_shared(backend, options.password) {
    m_shared.max_lease_wait = options.max_lease_wait;
  }
  ~Impl() {
    m_loops.clear();  // joins the threads before the listeners close
    if (!m_options.unix_path.empty() && m_unix_listener) {
      struct stat st {};
      if (stat(m_options.unix_path.c_str(), &st) == 0 && st.st_ino == m_unix_inode)
        unlink(m_options.unix_path.c_str());
    }
  }

  Result<void> start() {
    if (m_options.unix_path.empty() && m_options.tcp_port == 0) {
      return make_error(ErrorCode::kInvalidArgument,
                        "the RESP front needs a Unix socket path or a TCP port");
    }
    if (m_options.tcp_port < -1 || m_options.tcp_port > 65535) {
      return make_error(
          ErrorCode::kInvalidArgument,
          "RESP TCP port " + std::to_string(m_options.tcp_port) + " is out of range 1..65535");
    }
    if (!m_options.unix_path.empty()) {
      CCPOOL_TRY_ASSIGN(m_unix_listener, listen_unix(m_options.unix_path, &m_unix_inode));
    }
    if (m_options.tcp_port != 0) {
      CCPOOL_TRY_ASSIGN(m_tcp_listener, listen_loopback(m_options.tcp_port, m_tcp_port));
    }
    LoopConfig config;
    config.unix_listener = m_unix_listener ? m_unix_listener.get() : -1;
    config.tcp_listener = m_tcp_listener ? m_tcp_listener.get() : -1;
    config.max_value = m_options.max_value;
    config.max_args = m_options.max_args;
    config.max_connections = m_options.max_connections;
    config.max_unauthenticated = m_options.max_unauthenticated;
    for (size_t i = 0; i < std::max<size_t>(m_options.io_threads, 1); ++i) {
      m_loops.push_back(std::make_unique<IoLoop>(m_shared, config));
      CCPOOL_TRY(m_loops.back()->start());
    }
    return ok();
  }

  FrontOptions m_options;
  SharedState m_shared;
  UniqueFd m_unix_listener;
  UniqueFd m_tcp_listener;
  ino_t m_unix_inode = 0;
  int m_tcp_port = 0;
  std::vector<std::unique_ptr<IoLoop>> m_loops;  // declared last: destroyed first
};

Result<std::unique_ptr<Front>> Front::start(const FrontOptions& options, KvBackend& backend) {
  auto impl = std::make_unique<Impl>(options, backend);
  CCPOOL_TRY(impl->start());
  return std::unique_ptr<Front>(new Front(std::move(impl)));
}

Front::Front(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
Front::~Front() = default;

FrontCounters Front::counters() const {
  const SharedState& s = m_impl->m_shared;
  FrontCounters c;
  c.connections = s.connections.load();
  c.commands = s.commands.load();
  c.refused_peers = s.refused_peers.load();
  c.protocol_errors = s.protocol_errors.load();
  c.cross_protocol = s.cross_protocol.load();
  c.open_connections = s.connected.load();
  return c;
}

LeaseStats Front::lease_stats() const {
  return m_impl->m_shared.leases.stats();
}

int Front::tcp_port() const {
  return m_impl->m_tcp_port;
}
const std::string& Front::unix_path() const {
  return m_impl->m_options.unix_path;
}

}  // namespace ccpool::resp
