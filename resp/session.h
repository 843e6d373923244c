// One client's command state: authentication, name, id. Executes parsed
// commands against the KvBackend and appends RESP2 replies. Internal to
// ccpool_resp (tests and the benchmark use it directly).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/thread_annotations.h"
#include "resp/auth_budget.h"
#include "resp/front.h"
#include "resp/lease_table.h"

namespace ccpool::resp {

// State every session of one Front shares. Owned by the Front; outlives sessions.
struct SharedState {
  SharedState(KvBackend& kv, std::string pass, std::function<int64_t()> clock = {})
      : backend(kv),
        password(std::move(pass)),
        now(clock ? std::move(clock) : std::function<int64_t()>(unix_now_ms)) {}

  KvBackend& backend;
  const std::string password;  // empty = no AUTH
  const std::function<int64_t()> now;
  // KvBackend has no compare-and-set; SET NX/XX/GET/KEEPTTL read then write
  // under this mutex so they are atomic among front clients.
  Mutex conditional_mutex;
  std::atomic<uint64_t> next_client_id{1};
  std::atomic<uint64_t> connections{0};
  std::atomic<uint64_t> connected{0};        // open right now
  std::atomic<uint64_t> unauthenticated{0};  // open right now and not yet past AUTH
  std::atomic<uint64_t> commands{0};
  std::atomic<uint64_t> refused_peers{0};
  std::atomic<uint64_t> protocol_errors{0};
  std::atomic<uint64_t> cross_protocol{0};  // connections closed by IoLoop's cross-protocol guard
  AuthBudget auth_budget;                   // wrong passwords, front-wide
  // CCPOOL.LEASE: single-flight for values computed by the clients.
  LeaseTable leases;
  std::chrono::milliseconds max_lease_wait{kDefaultMaxLeaseWait};
};

// Wrong passwords one connection may try before it is closed.
inline constexpr int kMaxAuthFailures = 3;

class Session {
 public:
  explicit Session(SharedState& shared);
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Runs one command (argv non-empty) and appends exactly one reply to `out`,
  // or returns true having appended nothing: a deferred reply (set_deferral).
  bool execute(std::vector<std::string>& argv, std::string& out);

  // Installed by the io loop: a plain SET (no NX/XX/GET/KEEPTTL) then goes to
  // KvBackend::set_async and its reply is sent through the ReplyLater that
  // `defer(backlog bytes, stores)` returns, once the backend completes
  // (`stores`: the deferred command is such a SET); a CCPOOL.LEASE that waits
  // for another client's SET replies through one too. Without a deferral SET
  // waits inline and LEASE never waits.
  using ReplyLater = std::function<void(std::string reply)>;  // any thread, exactly once
  using Deferral = std::function<ReplyLater(size_t backlog_bytes, bool stores)>;
  void set_deferral(Deferral defer) { m_defer = std::move(defer); }
  static void set_reply(bool stored, std::string& out);
  // Whether execute() may defer this command's reply: SET without NX, XX, GET
  // or KEEPTTL. The loop runs no other command of the connection while a SET
  // it sent waits, so a later read sees that SET.
  static bool may_defer(const std::vector<std::string>& argv);
  bool quit_requested() const { return m_quit; }
  bool authenticated() const { return m_authenticated; }
  uint64_t id() const { return m_id; }

  struct Command;  // table entry; defined in session.cpp

 private:
  friend struct Commands;
  SharedState& m_shared;
  uint64_t m_id;
  bool m_authenticated;
  bool m_quit = false;
  int m_auth_failures = 0;
  int m_protocol = 2;  // 2 or 3, chosen by HELLO; RESP3 differs here only in nulls and HELLO's map
  bool m_deferred = false;  // the command running now deferred its reply
  Deferral m_defer;
  std::string m_name;
};

}  // namespace ccpool::resp
