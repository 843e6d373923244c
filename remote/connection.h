// One blocking hiredis connection with connect and per-operation timeouts.
// This is the only file pair that calls redis*; the rest of remote/ sees
// Reply values and Result<> errors.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "remote/endpoint.h"

struct redisContext;

namespace ccpool::remote {

struct Reply {
  enum class Type { kNil, kString, kInteger, kStatus, kError, kArray };
  Type type = Type::kNil;
  std::string str;        // kString, kStatus, kError
  long long integer = 0;  // kInteger
  std::vector<Reply> elements;  // kArray

  bool is_error() const { return type == Type::kError; }
};

// Owned by one thread at a time (the pool hands it out). Move-less, copy-less.
class Connection {
 public:
  // Connects within connect_timeout, then sets op_timeout as SO_RCVTIMEO and
  // SO_SNDTIMEO so no later call blocks longer per read/write. Sends AUTH
  // (when password is non-empty) and SELECT (when endpoint.db != 0).
  static Result<std::unique_ptr<Connection>> open(const Endpoint& endpoint,
                                                  const std::string& password,
                                                  std::chrono::milliseconds connect_timeout,
                                                  std::chrono::milliseconds op_timeout);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // One round trip. A transport failure (timeout, reset, refused, protocol)
  // is an Error and leaves the connection broken(): throw it away. A Redis
  // error reply (-ERR, -MOVED, -NOAUTH) is a Reply of type kError.
  // SIGPIPE from a peer that went away is blocked and consumed on this thread.
  Result<Reply> command(const std::vector<std::string_view>& args);

  bool broken() const { return m_broken; }

 private:
  explicit Connection(redisContext* context) : m_context(context) {}
  Error transport_error(const std::string& what) const;

  redisContext* m_context;
  bool m_broken = false;
};

}  // namespace ccpool::remote
