// One Redis connection: hiredis connects (with its timeout) and formats each
// command; the command's bytes are written and its reply is read here, under
// one deadline for the whole operation, through a ReplyReader that refuses a
// reply outside the caller's bounds before buffering it (hiredis 0.14 has no
// reply limit). This is the only file pair that calls redis*; the rest of
// remote/ sees Reply values and Result<> errors.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "remote/endpoint.h"
#include "remote/reply.h"
#include "remote/reply_reader.h"

struct redisContext;

namespace ccpool::remote {

// Owned by one thread at a time (the pool hands it out). Move-less, copy-less.
class Connection {
 public:
  // Connects within connect_timeout, then sends AUTH (when password is
  // non-empty) and SELECT (when endpoint.db != 0) as commands below.
  static Result<std::unique_ptr<Connection>> open(const Endpoint& endpoint,
                                                  const std::string& password,
                                                  std::chrono::milliseconds connect_timeout,
                                                  std::chrono::milliseconds op_timeout);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // One round trip, within deadline_for(command bytes, limits): the command
  // is written and one reply read, bounded by `limits`. A transport failure
  // (timeout, reset, refused), a malformed reply or one outside `limits` is
  // an Error and leaves the connection broken(): throw it away. A Redis
  // error reply (-ERR, -MOVED, -NOAUTH) is a Reply of type kError. Writes use
  // MSG_NOSIGNAL: a peer that went away raises no SIGPIPE.
  Result<Reply> command(const std::vector<std::string_view>& args,
                        const ReplyLimits& limits = ReplyLimits::small());

  // The whole operation's time: op_timeout, plus one second per 64 MiB the
  // command and its reply may carry (a 256 MiB value: 4 s more), so a server
  // that trickles bytes cannot hold a caller past it.
  std::chrono::milliseconds deadline_for(uint64_t command_bytes, const ReplyLimits& limits) const;

  bool broken() const { return m_broken; }

 private:
  Connection(redisContext* context, std::chrono::milliseconds op_timeout)
      : m_context(context), m_op_timeout(op_timeout) {}
  Result<Reply> exchange(const std::string& name, std::string_view wire, const ReplyLimits& limits);

  redisContext* m_context;
  const std::chrono::milliseconds m_op_timeout;
  bool m_broken = false;
};

}  // namespace ccpool::remote
