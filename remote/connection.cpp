#include "remote/connection.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>

#include <cstring>

namespace ccpool::remote {
namespace {

timeval to_timeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = ms.count() / 1000;
  tv.tv_usec = (ms.count() % 1000) * 1000;
  return tv;
}

// hiredis write()s to the socket; a peer that died raises SIGPIPE, which would
// kill a process that did not ignore it. A library must not change the
// process-wide disposition, so block it on this thread for the call and
// consume a SIGPIPE that the call itself raised.
class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigemptyset(&m_pipe);
    sigaddset(&m_pipe, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    m_was_pending = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &m_pipe, &m_old);
  }
  ~SigpipeBlock() {
    if (!m_was_pending) {
      sigset_t pending;
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        timespec zero{};
        sigtimedwait(&m_pipe, nullptr, &zero);
      }
    }
    pthread_sigmask(SIG_SETMASK, &m_old, nullptr);
  }
  SigpipeBlock(const SigpipeBlock&) = delete;
  SigpipeBlock& operator=(const SigpipeBlock&) = delete;

 private:
  sigset_t m_pipe;
  sigset_t m_old;
  bool m_was_pending = false;
};

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

Reply convert(const redisReply* r) {
  Reply out;
  switch (r->type) {
    case REDIS_REPLY_STRING: out.type = Reply::Type::kString; break;
    case REDIS_REPLY_STATUS: out.type = Reply::Type::kStatus; break;
    case REDIS_REPLY_ERROR: out.type = Reply::Type::kError; break;
    case REDIS_REPLY_INTEGER: out.type = Reply::Type::kInteger; break;
    case REDIS_REPLY_ARRAY: out.type = Reply::Type::kArray; break;
    default: out.type = Reply::Type::kNil; break;
  }
  if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS ||
      r->type == REDIS_REPLY_ERROR) {
    out.str.assign(r->str, r->len);
  }
  out.integer = r->integer;
  for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; ++i) {
    out.elements.push_back(convert(r->element[i]));
  }
  return out;
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
  std::unique_ptr<Connection> conn(new Connection(ctx));
  if (redisSetTimeout(ctx, to_timeval(op_timeout)) != REDIS_OK) {
    return tl::unexpected<Error>(conn->transport_error("setting the operation timeout"));
  }
  if (!password.empty()) CCPOOL_TRY(expect_ok(*conn, {"AUTH", password}, "AUTH"));
  if (endpoint.db != 0) {
    std::string db = std::to_string(endpoint.db);
    CCPOOL_TRY(expect_ok(*conn, {"SELECT", db}, "SELECT " + db));
  }
  return conn;
}

Connection::~Connection() { redisFree(m_context); }

Error Connection::transport_error(const std::string& what) const {
  return Error(classify(m_context->err, m_context->errstr),
               "Redis " + what + " failed: " + m_context->errstr);
}

Result<Reply> Connection::command(const std::vector<std::string_view>& args) {
  if (m_broken) return make_error(ErrorCode::kInternal, "Redis connection used after an error");
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  argv.reserve(args.size());
  lens.reserve(args.size());
  for (std::string_view a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  SigpipeBlock block;
  void* raw = redisCommandArgv(m_context, static_cast<int>(argv.size()), argv.data(), lens.data());
  if (raw == nullptr) {
    m_broken = true;
    return tl::unexpected<Error>(transport_error(std::string(args.empty() ? "" : args[0])));
  }
  auto* reply = static_cast<redisReply*>(raw);
  Reply out = convert(reply);
  freeReplyObject(reply);
  return out;
}

}  // namespace ccpool::remote
