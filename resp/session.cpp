// Command table and handlers. Reply texts copy redis-server 7.0's so clients
// that match on them (redis-py maps "-NOAUTH", "-WRONGPASS", "-NOPROTO" to
// exception types) behave as against a real server.
#include "resp/session.h"

#include <algorithm>
#include <charconv>
#include <limits>

#include "resp/reply.h"

namespace ccpool::resp {

using Args = std::vector<std::string>;
using Handler = void (*)(Session&, Args&, std::string&);

struct Session::Command {
  const char* name;
  int arity;     // redis-server's convention: n exact, -n at least n (name included)
  bool no_auth;  // runs before AUTH
  Handler handler;
};

namespace {

constexpr const char* kNotInteger = "ERR value is not an integer or out of range";
constexpr const char* kSyntax = "ERR syntax error";

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return out;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && lower(a) == lower(b);
}

std::optional<int64_t> to_int(std::string_view text) {
  int64_t value = 0;
  if (text.empty() || text[0] == '+') return std::nullopt;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

bool arity_ok(int arity, size_t argc) {
  return arity >= 0 ? argc == static_cast<size_t>(arity) : argc >= static_cast<size_t>(-arity);
}

void wrong_arity(std::string& out, std::string_view name) {
  reply::error(out, "ERR wrong number of arguments for '" + std::string(name) + "' command");
}

// "now + amount * unit" in ms, or nullopt when it is not positive or overflows,
// the cases redis-server answers "invalid expire time".
std::optional<int64_t> deadline_ms(int64_t now, int64_t amount, int64_t unit, bool absolute) {
  if (amount <= 0) return std::nullopt;
  if (amount > std::numeric_limits<int64_t>::max() / unit) return std::nullopt;
  int64_t ms = amount * unit;
  if (absolute) return ms;
  if (ms > std::numeric_limits<int64_t>::max() - now) return std::nullopt;
  return now + ms;
}

// Compares without an early exit so the time taken says nothing of how much of
// the secret matched. `secret` is non-empty.
bool constant_time_equal(std::string_view given, std::string_view secret) {
  unsigned diff = given.size() == secret.size() ? 0 : 1;
  for (size_t i = 0; i < given.size(); ++i) {
    diff |= static_cast<unsigned char>(given[i] ^ secret[i % secret.size()]);
  }
  return diff == 0;
}

}  // namespace

struct Commands {
  static SharedState& shared(Session& s) { return s.m_shared; }
  static KvBackend& kv(Session& s) { return s.m_shared.backend; }

  static void ping(Session&, Args& argv, std::string& out) {
    if (argv.size() > 2) return wrong_arity(out, "ping");
    if (argv.size() == 2) return reply::bulk(out, argv[1]);
    reply::simple(out, "PONG");
  }
  static void echo(Session&, Args& argv, std::string& out) { reply::bulk(out, argv[1]); }
  static void quit(Session& s, Args&, std::string& out) {
    s.m_quit = true;
    reply::ok(out);
  }

  static void null(const Session& s, std::string& out) {
    s.m_protocol == 3 ? reply::null_resp3(out) : reply::null_bulk(out);
  }

  static void get(Session& s, Args& argv, std::string& out) {
    auto value = kv(s).get(argv[1]);
    value ? reply::bulk(out, *value) : null(s, out);
  }

  // SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL]
  static void set(Session& s, Args& argv, std::string& out) {
    bool nx = false, xx = false, want_old = false, keep_ttl = false, has_expiry = false;
    int64_t expires = 0;
    int64_t now = shared(s).now();
    for (size_t i = 3; i < argv.size(); ++i) {
      std::string opt = lower(argv[i]);
      bool has_next = i + 1 < argv.size();
      if (opt == "nx" && !xx) {
        nx = true;
      } else if (opt == "xx" && !nx) {
        xx = true;
      } else if (opt == "get") {
        want_old = true;
      } else if (opt == "keepttl" && !has_expiry) {
        keep_ttl = true;
      } else if ((opt == "ex" || opt == "px" || opt == "exat" || opt == "pxat") && !has_expiry &&
                 !keep_ttl && has_next) {
        auto amount = to_int(argv[++i]);
        if (!amount) return reply::error(out, kNotInteger);
        bool seconds = opt == "ex" || opt == "exat";
        auto when = deadline_ms(now, *amount, seconds ? 1000 : 1, opt == "exat" || opt == "pxat");
        if (!when) return reply::error(out, "ERR invalid expire time in 'set' command");
        expires = *when;
        has_expiry = true;
      } else {
        return reply::error(out, kSyntax);
      }
    }
    if (!nx && !xx && !want_old && !keep_ttl) {
      if (s.m_defer) {
        // A leased key's waiters get the value from this SET once it is
        // stored; the copy is made only when someone may wait for it.
        std::optional<std::string> for_waiters;
        if (shared(s).leases.held(argv[1])) for_waiters = argv[2];
        kv(s).set_async(argv[1], argv[2], expires,
                        [later = s.m_defer(argv[2].size(), true), &st = shared(s), key = argv[1],
                         for_waiters = std::move(for_waiters)](bool stored) {
                          if (stored) st.leases.stored(key, [&] { return for_waiters; });
                          std::string reply;
                          Session::set_reply(stored, reply);
                          later(std::move(reply));
                        });
        s.m_deferred = true;
        return;
      }
      bool stored = kv(s).set(argv[1], argv[2], expires);
      if (stored) notify_stored(s, argv[1], argv[2]);
      return Session::set_reply(stored, out);
    }
    MutexLock lock(&shared(s).conditional_mutex);
    std::optional<std::string> old;
    bool present = false;
    if (want_old) {
      old = kv(s).get(argv[1]);
      present = old.has_value();
    } else {
      present = kv(s).exists(argv[1]);
    }
    if (keep_ttl && present) {
      int64_t at = kv(s).expires_at(argv[1]);
      expires = at > 0 ? at : 0;
    }
    bool write = !(nx && present) && !(xx && !present);
    if (write && !kv(s).set(argv[1], argv[2], expires)) return store_failed(out);
    if (write) notify_stored(s, argv[1], argv[2]);
    if (want_old) return old ? reply::bulk(out, *old) : null(s, out);
    write ? reply::ok(out) : null(s, out);
  }
  static void notify_stored(Session& s, const std::string& key, const std::string& value) {
    shared(s).leases.stored(key, [&] { return std::optional<std::string>(value); });
  }
  static void store_failed(std::string& out) {
    reply::error(
        out,
        "ERR the ccpool store refused the value (store full or unavailable; see the service log)");
  }

  static void mget(Session& s, Args& argv, std::string& out) {
    reply::array_header(out, argv.size() - 1);
    for (size_t i = 1; i < argv.size(); ++i) get_one(s, argv[i], out);
  }
  static void get_one(Session& s, const std::string& key, std::string& out) {
    auto value = kv(s).get(key);
    value ? reply::bulk(out, *value) : null(s, out);
  }
  static void mset(Session& s, Args& argv, std::string& out) {
    if (argv.size() % 2 == 0) return wrong_arity(out, "mset");
    for (size_t i = 1; i < argv.size(); i += 2) {
      if (!kv(s).set(argv[i], argv[i + 1], 0)) return store_failed(out);
      notify_stored(s, argv[i], argv[i + 1]);
    }
    reply::ok(out);
  }

  // CCPOOL.LEASE key wait-ms: the value when the key has one; else "+LEAD"
  // (the caller now holds the lease: compute the value and SET it, or
  // CCPOOL.RELEASE it); else another client leads and the reply waits for its
  // SET (the value), or "+MISS" once it gives up or wait-ms (capped by the
  // front's maximum) has passed: compute the value yourself.
  static void lease(Session& s, Args& argv, std::string& out) {
    auto wait = to_int(argv[2]);
    if (!wait || *wait < 0) return reply::error(out, kNotInteger);
    if (auto value = kv(s).get(argv[1])) return reply::bulk(out, *value);
    if (!s.m_defer) {  // no loop to answer later: never wait
      return reply::simple(out, shared(s).leases.acquire(argv[1], s.m_id, LeaseTable::Clock::now(),
                                                         [](auto) {}) == LeaseTable::Outcome::kLead
                                    ? "LEAD"
                                    : "MISS");
    }
    auto bound = std::min<int64_t>(*wait, shared(s).max_lease_wait.count());
    auto deadline = LeaseTable::Clock::now() + std::chrono::milliseconds(bound);
    Session::ReplyLater later = s.m_defer(0, false);
    s.m_deferred = true;
    auto waiter = [later](std::optional<std::string> value) {
      std::string reply;
      value ? reply::bulk(reply, *value) : reply::simple(reply, "MISS");
      later(std::move(reply));
    };
    if (shared(s).leases.acquire(argv[1], s.m_id, deadline, waiter) == LeaseTable::Outcome::kLead) {
      later("+LEAD\r\n");
    }
  }
  static void release(Session& s, Args& argv, std::string& out) {
    reply::integer(out, shared(s).leases.release(argv[1], s.m_id) ? 1 : 0);
  }
  static void del(Session& s, Args& argv, std::string& out) {
    int64_t removed = 0;
    for (size_t i = 1; i < argv.size(); ++i) removed += kv(s).del(argv[i]) ? 1 : 0;
    reply::integer(out, removed);
  }
  static void exists(Session& s, Args& argv, std::string& out) {
    int64_t found = 0;
    for (size_t i = 1; i < argv.size(); ++i) found += kv(s).exists(argv[i]) ? 1 : 0;
    reply::integer(out, found);
  }

  static void expire_generic(Session& s, Args& argv, std::string& out, int64_t unit,
                             const char* name) {
    if (argv.size() > 3) return reply::error(out, "ERR Unsupported option " + argv[3]);
    auto amount = to_int(argv[2]);
    if (!amount) return reply::error(out, kNotInteger);
    int64_t now = shared(s).now();
    if (*amount > 0 && *amount > (std::numeric_limits<int64_t>::max() - now) / unit) {
      return reply::error(out, std::string("ERR invalid expire time in '") + name + "' command");
    }
    // A deadline not in the future deletes the key, as redis-server does.
    if (*amount <= 0) return reply::integer(out, kv(s).del(argv[1]) ? 1 : 0);
    reply::integer(out, kv(s).expire(argv[1], now + *amount * unit) ? 1 : 0);
  }
  static void expire(Session& s, Args& argv, std::string& out) {
    expire_generic(s, argv, out, 1000, "expire");
  }
  static void pexpire(Session& s, Args& argv, std::string& out) {
    expire_generic(s, argv, out, 1, "pexpire");
  }

  static void ttl_generic(Session& s, Args& argv, std::string& out, bool millis) {
    int64_t at = kv(s).expires_at(argv[1]);
    if (at < 0) return reply::integer(out, at);  // -2 missing, -1 no expiry
    int64_t left = std::max<int64_t>(at - shared(s).now(), 0);
    reply::integer(out, millis ? left : (left + 500) / 1000);
  }
  static void ttl(Session& s, Args& argv, std::string& out) { ttl_generic(s, argv, out, false); }
  static void pttl(Session& s, Args& argv, std::string& out) { ttl_generic(s, argv, out, true); }

  static void select(Session&, Args& argv, std::string& out) {
    auto db = to_int(argv[1]);
    if (!db) return reply::error(out, kNotInteger);
    if (*db != 0) return reply::error(out, "ERR DB index is out of range");
    reply::ok(out);
  }

  static void auth(Session& s, Args& argv, std::string& out) {
    if (argv.size() > 3) return reply::error(out, kSyntax);
    if (shared(s).password.empty()) {
      return reply::error(
          out,
          "ERR AUTH <password> called without any password configured for the default user. "
          "Are you sure your configuration is correct?");
    }
    std::string refused = try_auth(s, argv.size() == 3 ? argv[1] : "default", argv.back());
    if (!refused.empty()) return reply::error(out, refused);
    reply::ok(out);
  }
  // A wrong password counts; the kMaxAuthFailures-th closes the connection
  // (after its reply), so guessing costs a reconnect every few tries, and the
  // front-wide AuthBudget bounds the tries of all connections together.
  // Returns the error reply, empty when authenticated.
  static std::string try_auth(Session& s, std::string_view user, std::string_view password) {
    SharedState& st = shared(s);
    if (int64_t wait = st.auth_budget.locked_for(st.now()); wait > 0) {
      if (++s.m_auth_failures >= kMaxAuthFailures) s.m_quit = true;
      return "ERR too many wrong AUTH passwords on this ccpool front; AUTH is refused for " +
             std::to_string(wait) + " ms more";
    }
    bool good = user == "default" && constant_time_equal(password, st.password);
    if (good) {
      s.m_authenticated = true;
      return "";
    }
    st.auth_budget.failed(st.now());
    if (++s.m_auth_failures >= kMaxAuthFailures) s.m_quit = true;
    return "WRONGPASS invalid username-password pair or user is disabled.";
  }

  static void client(Session& s, Args& argv, std::string& out);
  static void hello(Session& s, Args& argv, std::string& out);
  static void command(Session& s, Args& argv, std::string& out);
  static void info(Session& s, Args& argv, std::string& out);
};

const Session::Command kCommands[] = {
    {"ping", -1, false, Commands::ping},
    {"echo", 2, false, Commands::echo},
    {"quit", -1, true, Commands::quit},
    {"get", 2, false, Commands::get},
    {"set", -3, false, Commands::set},
    {"mget", -2, false, Commands::mget},
    {"mset", -3, false, Commands::mset},
    {"del", -2, false, Commands::del},
    {"exists", -2, false, Commands::exists},
    {"expire", -3, false, Commands::expire},
    {"pexpire", -3, false, Commands::pexpire},
    {"ttl", 2, false, Commands::ttl},
    {"pttl", 2, false, Commands::pttl},
    {"select", 2, false, Commands::select},
    {"auth", -2, true, Commands::auth},
    {"client", -2, false, Commands::client},
    {"hello", -1, true, Commands::hello},
    {"command", -1, false, Commands::command},
    {"info", -1, false, Commands::info},
    {"ccpool.lease", 3, false, Commands::lease},
    {"ccpool.release", 2, false, Commands::release},
};

namespace {

const Session::Command* find_command(std::string_view name) {
  std::string key = lower(name);
  for (const auto& cmd : kCommands) {
    if (key == cmd.name) return &cmd;
  }
  return nullptr;
}

// "ERR unknown command 'x', with args beginning with: 'a' 'b' " (redis-server
// quotes at most 128 bytes of arguments, each followed by a blank).
std::string unknown_command_text(const Args& argv) {
  std::string text =
      "ERR unknown command '" + argv[0].substr(0, 128) + "', with args beginning with: ";
  size_t budget = 128;
  for (size_t i = 1; i < argv.size() && budget > 0; ++i) {
    std::string arg = argv[i].substr(0, budget);
    budget -= arg.size();
    text += "'" + arg + "' ";
  }
  return text;
}

}  // namespace

void Commands::client(Session& s, Args& argv, std::string& out) {
  std::string sub = lower(argv[1]);
  auto arity = [&](size_t n) {
    if (argv.size() == n) return true;
    wrong_arity(out, "client|" + sub);
    return false;
  };
  if (sub == "id") {
    if (arity(2)) reply::integer(out, static_cast<int64_t>(s.m_id));
  } else if (sub == "getname") {
    if (arity(2)) s.m_name.empty() ? null(s, out) : reply::bulk(out, s.m_name);
  } else if (sub == "setname") {
    if (!arity(3)) return;
    for (char c : argv[2]) {
      if (c < '!' || c > '~') {
        return reply::error(
            out, "ERR Client names cannot contain spaces, newlines or special characters.");
      }
    }
    s.m_name = argv[2];
    reply::ok(out);
  } else if (sub == "setinfo") {
    if (arity(4)) reply::ok(out);  // lib-name / lib-ver: accepted, not kept
  } else {
    reply::error(out, "ERR unknown subcommand '" + argv[1].substr(0, 128) + "'. Try CLIENT HELP.");
  }
}

// HELLO [protover [AUTH user pass] [SETNAME name]]: RESP2 or RESP3 (redis-py 5+
// asks for 3). The reply is redis-server's map; RESP2 flattens it to an array.
// The commands served here answer alike in both protocols except for nulls.
void Commands::hello(Session& s, Args& argv, std::string& out) {
  if (argv.size() >= 2) {
    auto version = to_int(argv[1]);
    if (!version)
      return reply::error(out, "ERR Protocol version is not an integer or out of range");
    if (*version != 2 && *version != 3) {
      return reply::error(out, "NOPROTO unsupported protocol version");
    }
  }
  std::string name = s.m_name;
  bool auth_given = false;
  for (size_t i = 2; i < argv.size(); ++i) {
    bool more = argv.size() - i - 1;
    if (iequals(argv[i], "auth") && argv.size() - i - 1 >= 2) {
      std::string refused = try_auth(s, argv[i + 1], argv[i + 2]);
      if (!refused.empty()) return reply::error(out, refused);
      auth_given = true;
      i += 2;
    } else if (iequals(argv[i], "setname") && more) {
      name = argv[++i];
    } else {
      return reply::error(out, "ERR Syntax error in HELLO option '" + argv[i].substr(0, 128) + "'");
    }
  }
  if (!s.m_authenticated && !auth_given) {
    return reply::error(
        out,
        "NOAUTH HELLO must be called with the client already authenticated, otherwise the "
        "HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and "
        "select the RESP protocol version at the same time");
  }
  s.m_name = name;
  if (argv.size() >= 2) s.m_protocol = static_cast<int>(*to_int(argv[1]));
  s.m_protocol == 3 ? reply::map_header(out, 7) : reply::array_header(out, 14);
  reply::bulk(out, "server");
  reply::bulk(out, "redis");
  reply::bulk(out, "version");
  reply::bulk(out, "7.0.0");
  reply::bulk(out, "proto");
  reply::integer(out, s.m_protocol);
  reply::bulk(out, "id");
  reply::integer(out, static_cast<int64_t>(s.m_id));
  reply::bulk(out, "mode");
  reply::bulk(out, "standalone");
  reply::bulk(out, "role");
  reply::bulk(out, "master");
  reply::bulk(out, "modules");
  reply::array_header(out, 0);
}

// COMMAND is minimal: clients call COUNT, DOCS and INFO to learn hints; empty
// answers make them fall back to plain behaviour.
void Commands::command(Session& s, Args& argv, std::string& out) {
  std::string sub = argv.size() > 1 ? lower(argv[1]) : "";
  if (sub.empty() || sub == "docs") return reply::array_header(out, 0);
  if (sub == "count") return reply::integer(out, static_cast<int64_t>(std::size(kCommands)));
  if (sub == "list") {
    reply::array_header(out, std::size(kCommands));
    for (const auto& cmd : kCommands) reply::bulk(out, cmd.name);
    return;
  }
  if (sub == "info") {
    reply::array_header(out, argv.size() - 2);
    for (size_t i = 2; i < argv.size(); ++i) null(s, out);
    return;
  }
  reply::error(out, "ERR unknown subcommand '" + argv[1].substr(0, 128) + "'. Try COMMAND HELP.");
}

void Commands::info(Session& s, Args&, std::string& out) {
  SharedState& st = shared(s);
  std::string text =
      "# Server\r\nredis_version:7.0.0\r\nredis_mode:standalone\r\nccpool_front:1\r\n\r\n"
      "# Clients\r\nconnected_clients:" +
      std::to_string(st.connected.load()) +
      "\r\n\r\n"
      "# Stats\r\ntotal_connections_received:" +
      std::to_string(st.connections.load()) +
      "\r\ntotal_commands_processed:" + std::to_string(st.commands.load()) +
      "\r\nrejected_connections:" + std::to_string(st.refused_peers.load()) +
      "\r\nccpool_refused_peers:" + std::to_string(st.refused_peers.load()) +
      "\r\nccpool_protocol_errors:" + std::to_string(st.protocol_errors.load()) +
      "\r\nccpool_cross_protocol:" + std::to_string(st.cross_protocol.load()) + "\r\n";
  reply::bulk(out, text);
}

Session::Session(SharedState& shared)
    : m_shared(shared),
      m_id(shared.next_client_id.fetch_add(1)),
      m_authenticated(shared.password.empty()) {}

bool Session::execute(std::vector<std::string>& argv, std::string& out) {
  m_shared.commands.fetch_add(1, std::memory_order_relaxed);
  m_deferred = false;
  const Command* cmd = find_command(argv[0]);
  if (!cmd) {
    reply::error(out, unknown_command_text(argv));
  } else if (!arity_ok(cmd->arity, argv.size())) {
    wrong_arity(out, cmd->name);
  } else if (!m_authenticated && !cmd->no_auth) {
    reply::error(out, "NOAUTH Authentication required.");
  } else {
    cmd->handler(*this, argv, out);
  }
  return m_deferred;
}

void Session::set_reply(bool stored, std::string& out) {
  stored ? reply::ok(out) : Commands::store_failed(out);
}

bool Session::may_defer(const std::vector<std::string>& argv) {
  if (argv.size() < 3 || !iequals(argv[0], "set")) return false;
  for (size_t i = 3; i < argv.size(); ++i) {
    std::string opt = lower(argv[i]);
    if (opt == "nx" || opt == "xx" || opt == "get" || opt == "keepttl") return false;
  }
  return true;
}

}  // namespace ccpool::resp
