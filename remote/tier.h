// The Redis cluster tier: results shared across nodes and cross-node
// single-flight leases. Values are opaque byte strings (the store's packed
// entry format); the store validates them through RemoteOptions::validate.
//
// Contract: remote trouble never fails a caller and never blocks it beyond
// connect_timeout + op_timeout (or breaker-open: no Redis call at all).
// Every method is thread-safe. Wire layout of values: docs/remote.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"
#include "base/hash.h"

namespace ccpool::remote {

struct RemoteOptions {
  std::string url;  // redis://host:port[/db], rediss://... (hiredis SSL if available in Debian's
                    // build, else a clear error), unix:///path
  std::string password_file;  // CCPOOL_REMOTE_PASSWORD_FILE; never on argv; AUTH when set
  std::string key_prefix = "ccpool:";
  std::string hmac_key_file;  // when set: sign on write, require a valid signature on read
  std::chrono::milliseconds connect_timeout{300}, op_timeout{300};
  int breaker_failures = 3;                           // consecutive failures that open the breaker
  std::chrono::milliseconds breaker_cooldown{10000};  // how long it stays open
  std::chrono::seconds ttl{7 * 24 * 3600};            // EXPIRE on written values (0 = none)
  uint64_t max_value = 256ull << 20;                  // larger values are skipped (counted)
  std::chrono::milliseconds lease_ttl{10000};         // renewed every lease_ttl/3 while held
  std::chrono::milliseconds poll_interval{50};
  // The longest a node waits on another node's lease before it compiles
  // itself; a holder that keeps renewing cannot make it wait longer.
  std::chrono::milliseconds lease_wait_max{600000};
  std::function<bool(std::string_view value)>
      validate;  // store-side structural+checksum validation; false -> counted as invalid, never
                 // returned
  // Write-back queue bounds; a put_async beyond either is dropped (counted).
  size_t write_queue_entries = 256;
  uint64_t write_queue_bytes = 1ull << 30;
  // How long ~Tier keeps draining queued writes before dropping the rest.
  std::chrono::milliseconds shutdown_drain{2000};
};

struct RemoteCounters {
  uint64_t hits = 0, misses = 0, errors = 0, writes = 0, skipped = 0, invalid = 0,
           bad_signature = 0, breaker_opened = 0;
  bool breaker_open = false;
  uint64_t lease_acquired = 0, lease_waits = 0, lease_expired = 0;
  // Added: operations not attempted because the breaker was open; writes
  // dropped because the queue was full or the tier was shutting down; leases
  // this node held that another token took over (renewal found them gone).
  uint64_t breaker_rejected = 0, dropped = 0, lease_lost = 0;
  // Leases found without a TTL (no node of ours writes one): ignored, the
  // caller compiles without a lease instead of waiting on them.
  uint64_t lease_untimed = 0;
};

enum class LeaseState { kAcquired, kHeldByOther, kUnavailable };

class TierImpl;

class Tier {
 public:
  static Result<std::unique_ptr<Tier>> create(
      const RemoteOptions& options);  // parses the URL, reads the key/password files (clear errors
                                      // naming the file); does not need Redis to be up
  ~Tier();  // stops the writer and renewal threads (bounded wait); held leases are NOT released
            // (they expire after lease_ttl)
  Tier(const Tier&) = delete;
  Tier& operator=(const Tier&) = delete;

  std::optional<std::string> get(
      const Digest& key);  // verified value or nullopt (miss, error, breaker open, bad/missing
                           // signature, invalid)
  void put_async(
      const Digest& key,
      std::string value);  // off the caller's path: a background writer thread with a bounded queue
  // SET <prefix>lease:<hex> <node-token> NX PX ttl; renewed in background
  // while held. A lease held elsewhere without a TTL is kUnavailable (counted
  // lease_untimed): only a hostile or broken writer makes one, and it would
  // never expire.
  LeaseState acquire_lease(const Digest& key);
  std::chrono::milliseconds lease_wait_max() const;  // RemoteOptions::lease_wait_max
  // Compare-and-delete (EVAL Lua); stops renewal at once. The delete itself is
  // queued behind this Tier's earlier put_async calls, so a waiter never sees
  // the lease gone before the value is written.
  void release_lease(const Digest& key);
  // Waits while another node holds the lease: returns the value once it appears, or nullopt when
  // the lease vanished/expired without a value, the wait exceeded max_wait, or Redis failed.
  // Bounded polling (or pub/sub).
  std::optional<std::string> wait_for_result(const Digest& key, std::chrono::milliseconds max_wait);
  RemoteCounters counters() const;
  void flush_for_testing();  // blocks until the write queue is empty

  // Added: the Redis keys this tier uses, for tests and operators.
  std::string value_key(const Digest& key) const;  // <prefix>obj:<hex>
  std::string lease_key(const Digest& key) const;  // <prefix>lease:<hex>
  const std::string& node_token() const;           // hostname:pid:random

 private:
  explicit Tier(std::unique_ptr<TierImpl> impl);
  std::unique_ptr<TierImpl> m_impl;
};

}  // namespace ccpool::remote
