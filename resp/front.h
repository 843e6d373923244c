// The Redis-protocol front: lets Inductor's and Triton's redis-py remote caches
// read and write the node store with no code change. RESP2 over a Unix socket
// (always) and 127.0.0.1:PORT (optional), peer uid checked on both.
//
// This library knows nothing of LMDB or compilers: storage sits behind
// KvBackend, which the service implements over the node store and cluster tier.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/error.h"
#include "base/thread_annotations.h"
#include "resp/lease_table.h"

namespace ccpool::resp {

// Storage seen by the front. Implementations must be thread-safe: the front
// calls them from several I/O threads at once. Times are unix milliseconds.
class KvBackend {
 public:
  virtual ~KvBackend() = default;
  virtual std::optional<std::string> get(std::string_view key) = 0;  // expired keys read as missing
  // expires_at_ms: 0 = no expiry. false: could not store (the client gets an error reply).
  virtual bool set(std::string_view key, std::string_view value, int64_t expires_at_ms) = 0;
  // A plain SET whose reply waits for the write: `done(stored)` runs exactly
  // once, on any thread, after the value is durable (true) or refused (false).
  // The front sends the SET's reply only from `done`. The default runs set().
  using SetDone = std::function<void(bool stored)>;
  virtual void set_async(std::string_view key, std::string_view value, int64_t expires_at_ms,
                         SetDone done) {
    done(set(key, value, expires_at_ms));
  }
  // The calling loop has no more set_async calls for now (end of its pass over
  // the sockets): a backend that batches may write what it holds at once.
  virtual void end_of_burst() {}
  virtual bool del(std::string_view key) = 0;  // true if it existed
  virtual bool exists(std::string_view key) = 0;
  virtual bool expire(std::string_view key, int64_t expires_at_ms) = 0;  // false if missing
  virtual int64_t expires_at(std::string_view key) = 0;  // -2 missing, -1 no expiry, else unix ms
};

inline constexpr size_t kPreAuthMaxArgs = 8;
// The longest a CCPOOL.LEASE waits for another client's value (a client may ask for less).
inline constexpr std::chrono::milliseconds kDefaultMaxLeaseWait{600'000};
inline constexpr size_t kPreAuthMaxBytes = 4096;

// Current unix time in milliseconds (CLOCK_REALTIME), the clock TTLs use.
int64_t unix_now_ms();

struct FrontOptions {
  std::string unix_path;  // e.g. <state dir>/resp.sock; created 0600; empty = no Unix listener
  // 0 = no TCP; > 0 = listen on 127.0.0.1:port only; -1 = 127.0.0.1 on an ephemeral port (tests).
  int tcp_port = 0;
  std::string password;  // empty = none; when set AUTH is required on both listeners
  // A bulk longer than this is answered "-ERR value too large" and skipped; one
  // longer than max(2 * max_value, 512 MiB) is a protocol error and closes the
  // connection. A whole command's payload is capped at max_value + 1 MiB.
  uint64_t max_value = 256ull << 20;
  size_t max_args = 1024 * 1024;
  size_t max_connections = 1024;  // further connections are accepted and closed at once
  // With a password: connections not yet past AUTH, at most this many at once
  // (further ones are closed at once); each may send requests of at most
  // kPreAuthMaxArgs arguments and kPreAuthMaxBytes bytes (more closes it), and
  // kMaxAuthFailures wrong passwords close it. Unbounded buffering and
  // password guessing are what CVE-2021-32675 fixed in redis-server.
  size_t max_unauthenticated = 16;
  size_t io_threads = 1;  // epoll threads; a slow backend call stalls only its own thread
  std::chrono::milliseconds max_lease_wait = kDefaultMaxLeaseWait;  // cap on a CCPOOL.LEASE wait
};

// A thread-safe map for tests, benchmarks and the fuzzer. The clock is a seam
// so tests can move time forward.
class InMemoryKv : public KvBackend {
 public:
  using Clock = std::function<int64_t()>;
  explicit InMemoryKv(Clock now_ms = {});

  std::optional<std::string> get(std::string_view key) override;
  bool set(std::string_view key, std::string_view value, int64_t expires_at_ms) override;
  bool del(std::string_view key) override;
  bool exists(std::string_view key) override;
  bool expire(std::string_view key, int64_t expires_at_ms) override;
  int64_t expires_at(std::string_view key) override;
  size_t size();  // live (unexpired) entries

 private:
  struct Entry {
    std::string value;
    int64_t expires_at_ms = 0;  // 0 = none
  };
  // Finds a live entry, erasing it when expired.
  Entry* find_live(std::string_view key) REQUIRES(m_mutex);

  Clock m_now;
  Mutex m_mutex;
  std::unordered_map<std::string, Entry> m_entries GUARDED_BY(m_mutex);
};

struct FrontCounters {
  uint64_t connections = 0;      // accepted and admitted, since start
  uint64_t commands = 0;         // commands executed
  uint64_t refused_peers = 0;    // wrong uid, or over max_connections
  uint64_t protocol_errors = 0;  // connections closed for malformed RESP
  uint64_t cross_protocol =
      0;  // connections closed by the cross-protocol guard (HTTP and the like)
  uint64_t open_connections = 0;  // admitted and open right now
};

class Front {
 public:
  // Binds the listeners (replacing a stale socket file at unix_path) and starts
  // options.io_threads epoll threads. Errors: kIo (bind/listen), kInvalidArgument.
  static Result<std::unique_ptr<Front>> start(const FrontOptions& options, KvBackend& backend);
  ~Front();  // stops listening, closes connections, joins threads; removes the socket file
  Front(const Front&) = delete;
  Front& operator=(const Front&) = delete;

  FrontCounters counters() const;
  LeaseStats lease_stats() const;  // CCPOOL.LEASE: keys in flight, waiters, outcomes
  int tcp_port() const;            // the bound port (resolves -1), 0 when TCP is off
  const std::string& unix_path() const;

  class Impl;

 private:
  explicit Front(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

// Incremental RESP2 request parser, usable alone (and by the fuzzer).
// feed() appends bytes as they arrive; next() returns one complete command,
// nullopt when more bytes are needed, or an error:
//   kFull     - a bulk was longer than max_bulk (or the command over its cap):
//               reply "-ERR value too large"; the parser skips the rest of that
//               command as it arrives and stays usable.
//   kProtocol - malformed input; message is the Redis text ("Protocol error: ...").
//               Reply it and close: the parser is poisoned.
// Memory grows with the bytes fed, never with a declared length.
class RespParser {
 public:
  explicit RespParser(size_t max_bulk, size_t max_args);
  // New bounds for the commands not yet started (the front lifts the small
  // pre-AUTH bounds once a connection authenticates). max_command caps one
  // command's payload (default max_bulk + 1 MiB).
  void set_limits(size_t max_bulk, size_t max_args, uint64_t max_command);
  void feed(std::string_view data);
  Result<std::optional<std::vector<std::string>>> next();
  size_t buffered() const { return m_buf.size() - m_pos; }  // bytes not yet consumed
  // Whether the command next() returned last was an inline (text line)
  // command rather than a RESP array: the front's cross-protocol guard.
  bool last_was_inline() const { return m_last_inline; }

 private:
  Result<std::optional<std::string_view>> take_line(size_t limit, const char* what);
  Result<std::optional<std::vector<std::string>>> parse_inline();
  Result<bool> parse_bulk();  // true when one bulk (or skipped bulk) completed
  void compact();

  size_t m_max_bulk;
  size_t m_max_args;
  uint64_t m_max_command;  // payload cap for one command
  std::string m_buf;
  size_t m_pos = 0;             // first unconsumed byte of m_buf
  size_t m_inline_scanned = 0;  // bytes after m_pos already searched for an inline '\n'
  int64_t m_args_left = -1;     // -1: between commands
  int64_t m_bulk_len = -1;      // -1: expecting a '$' header
  uint64_t m_skip_left = 0;     // bytes of an oversized bulk still to drop
  bool m_discarding = false;    // the current command was answered "too large"
  uint64_t m_command_bytes = 0;
  std::vector<std::string> m_args;
  bool m_poisoned = false;
  bool m_last_inline = false;
};

}  // namespace ccpool::resp
