#include "remote/connection.h"

#include <hiredis/hiredis.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>
#include <cstring>

#include "base/fs.h"

namespace ccpool::remote {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kBytesPerSecondAllowed = 64ull << 20;  // deadline_for's transfer allowance
constexpr size_t kReadChunk = 64 * 1024;

timeval to_timeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = ms.count() / 1000;
  tv.tv_usec = (ms.count() % 1000) * 1000;
  return tv;
}

ErrorCode classify(int err, const char* errstr) {
  if (err == REDIS_ERR_PROTOCOL) return ErrorCode::kProtocol;
  if (std::strstr(errstr, "timed out") || std::strstr(errstr, "temporarily unavailable")) {
    return ErrorCode::kTimeout;
  }
  if (std::strstr(errstr, "refused") || std::strstr(errstr, "closed") ||
      std::strstr(errstr, "No such file") || err == REDIS_ERR_EOF) {
    return ErrorCode::kUnreachable;
  }
  return ErrorCode::kIo;
}

Result<void> expect_ok(Connection& conn, const std::vector<std::string_view>& args,
                       const std::string& what) {
  CCPOOL_TRY_ASSIGN(Reply reply, conn.command(args));
  if (reply.is_error()) {
    ErrorCode code = reply.str.find("WRONGPASS") != std::string::npos ||
                             reply.str.find("NOAUTH") != std::string::npos
                         ? ErrorCode::kPermission
                         : ErrorCode::kProtocol;
    return make_error(code, what + " refused by Redis: " + reply.str);
  }
  return ok();
}

// Waits until `fd` is ready for `events` or the deadline passes.
Result<void> wait_ready(int fd, short events, Clock::time_point deadline, const std::string& what) {
  for (;;) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) break;
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 60'000)));
    if (rc > 0) return ok();
    if (rc < 0 && errno != EINTR)
      return make_error(ErrorCode::kIo, what + ": poll: " + errno_text(errno));
  }
  return make_error(ErrorCode::kTimeout, what + " timed out (the operation's deadline passed)");
}

}  // namespace

Result<std::unique_ptr<Connection>> Connection::open(const Endpoint& endpoint,
                                                     const std::string& password,
                                                     std::chrono::milliseconds connect_timeout,
                                                     std::chrono::milliseconds op_timeout) {
  timeval ctv = to_timeval(connect_timeout);
  redisContext* ctx = endpoint.kind == Endpoint::Kind::kUnix
                          ? redisConnectUnixWithTimeout(endpoint.path.c_str(), ctv)
                          : redisConnectWithTimeout(endpoint.host.c_str(), endpoint.port, ctv);
  if (ctx == nullptr) {
    return make_error(ErrorCode::kInternal, "cannot allocate a Redis context (out of memory)");
  }
  if (ctx->err) {
    Error error(classify(ctx->err, ctx->errstr),
                "cannot connect to " + endpoint.describe() + ": " + ctx->errstr);
    redisFree(ctx);
    return tl::unexpected<Error>(std::move(error));
  }
  std::unique_ptr<Connection> conn(new Connection(ctx, op_timeout));
  if (!password.empty()) CCPOOL_TRY(expect_ok(*conn, {"AUTH", password}, "AUTH"));
  if (endpoint.db != 0) {
    std::string db = std::to_string(endpoint.db);
    CCPOOL_TRY(expect_ok(*conn, {"SELECT", db}, "SELECT " + db));
  }
  return conn;
}

Connection::~Connection() {
  redisFree(m_context);
}

std::chrono::milliseconds Connection::deadline_for(uint64_t command_bytes,
                                                   const ReplyLimits& limits) const {
  uint64_t bytes = command_bytes + limits.max_total;
  return m_op_timeout + std::chrono::milliseconds(bytes * 1000 / kBytesPerSecondAllowed);
}

Result<Reply> Connection::command(const std::vector<std::string_view>& args,
                                  const ReplyLimits& limits) {
  if (m_broken) return make_error(ErrorCode::kInternal, "Redis connection used after an error");
  std::string name(args.empty() ? "" : args[0]);
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  argv.reserve(args.size());
  lens.reserve(args.size());
  for (std::string_view a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  char* formatted = nullptr;
  int length =
      redisFormatCommandArgv(&formatted, static_cast<int>(argv.size()), argv.data(), lens.data());
  if (length < 0 || formatted == nullptr) {
    return make_error(ErrorCode::kInternal,
                      "cannot format the Redis " + name + " command (out of memory)");
  }
  std::string_view wire(formatted, static_cast<size_t>(length));
  auto reply = exchange(name, wire, limits);
  redisFreeCommand(formatted);
  if (!reply) m_broken = true;
  return reply;
}

Result<Reply> Connection::exchange(const std::string& name, std::string_view wire,
                                   const ReplyLimits& limits) {
  const int fd = m_context->fd;
  const auto budget = deadline_for(wire.size(), limits);
  const auto deadline = Clock::now() + budget;
  auto failed = [&](const Error& e) {
    return make_error(e.code, "Redis " + name + " failed: " + e.message + " (deadline " +
                                  std::to_string(budget.count()) + " ms for the whole command)");
  };
  while (!wire.empty()) {
    if (auto ready = wait_ready(fd, POLLOUT, deadline, "writing"); !ready)
      return failed(ready.error());
    ssize_t n = ::send(fd, wire.data(), wire.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      wire.remove_prefix(static_cast<size_t>(n));
    } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      ErrorCode code =
          errno == EPIPE || errno == ECONNRESET ? ErrorCode::kUnreachable : ErrorCode::kIo;
      return failed(Error(code, "write: " + errno_text(errno)));
    }
  }
  ReplyReader reader(limits);
  char buffer[kReadChunk];
  for (;;) {
    if (auto ready = wait_ready(fd, POLLIN, deadline, "reading the reply"); !ready)
      return failed(ready.error());
    ssize_t n = ::recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
    if (n == 0) return failed(Error(ErrorCode::kUnreachable, "the server closed the connection"));
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
      ErrorCode code = errno == ECONNRESET ? ErrorCode::kUnreachable : ErrorCode::kIo;
      return failed(Error(code, "read: " + errno_text(errno)));
    }
    auto done = reader.feed(std::string_view(buffer, static_cast<size_t>(n)));
    if (!done) return failed(done.error());
    if (*done) return reader.take();
  }
}

}  // namespace ccpool::remote
