#include "resp/session.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ccpool::resp {
namespace {

// A session over an InMemoryKv whose clock the test moves.
class SessionTest : public ::testing::Test {
 protected:
  explicit SessionTest(std::string password = "")
      : m_kv([this] { return m_now; }),
        m_shared(m_kv, std::move(password), [this] { return m_now; }),
        m_session(m_shared) {}

  std::string run(std::vector<std::string> argv) {
    std::string out;
    m_session.execute(argv, out);
    return out;
  }

  int64_t m_now = 1'700'000'000'000;
  InMemoryKv m_kv;
  SharedState m_shared;
  Session m_session;
};

TEST_F(SessionTest, PingEchoAndUnknownCommands) {
  EXPECT_EQ(run({"PING"}), "+PONG\r\n");
  EXPECT_EQ(run({"ping", "hi"}), "$2\r\nhi\r\n");
  EXPECT_EQ(run({"ECHO", "a\r\nb"}), "$4\r\na\r\nb\r\n");
  EXPECT_EQ(run({"FLUSHALL"}), "-ERR unknown command 'FLUSHALL', with args beginning with: \r\n");
  EXPECT_EQ(run({"foo", "a", "b\r\nc"}),
            "-ERR unknown command 'foo', with args beginning with: 'a' 'b  c' \r\n");
}

TEST_F(SessionTest, WrongArityUsesRedisText) {
  EXPECT_EQ(run({"GET"}), "-ERR wrong number of arguments for 'get' command\r\n");
  EXPECT_EQ(run({"get", "a", "b"}), "-ERR wrong number of arguments for 'get' command\r\n");
  EXPECT_EQ(run({"SET", "k"}), "-ERR wrong number of arguments for 'set' command\r\n");
  EXPECT_EQ(run({"MSET", "a", "1", "b"}), "-ERR wrong number of arguments for 'mset' command\r\n");
  EXPECT_EQ(run({"ping", "a", "b"}), "-ERR wrong number of arguments for 'ping' command\r\n");
  EXPECT_EQ(run({"CLIENT", "SETNAME"}),
            "-ERR wrong number of arguments for 'client|setname' command\r\n");
}

TEST_F(SessionTest, SetGetMgetMsetDelExists) {
  EXPECT_EQ(run({"SET", "a", "1"}), "+OK\r\n");
  EXPECT_EQ(run({"GET", "a"}), "$1\r\n1\r\n");
  EXPECT_EQ(run({"GET", "missing"}), "$-1\r\n");
  EXPECT_EQ(run({"MSET", "b", "2", "c", ""}), "+OK\r\n");
  EXPECT_EQ(run({"MGET", "a", "nope", "c"}), "*3\r\n$1\r\n1\r\n$-1\r\n$0\r\n\r\n");
  EXPECT_EQ(run({"EXISTS", "a", "a", "nope"}), ":2\r\n");
  EXPECT_EQ(run({"DEL", "a", "b", "nope"}), ":2\r\n");
  EXPECT_EQ(run({"EXISTS", "a"}), ":0\r\n");
}

TEST_F(SessionTest, SetNxXxAndGet) {
  EXPECT_EQ(run({"SET", "k", "v1", "XX"}), "$-1\r\n");
  EXPECT_EQ(run({"SET", "k", "v1", "NX"}), "+OK\r\n");
  EXPECT_EQ(run({"SET", "k", "v2", "nx"}), "$-1\r\n");
  EXPECT_EQ(run({"SET", "k", "v3", "XX", "GET"}), "$2\r\nv1\r\n");
  EXPECT_EQ(run({"GET", "k"}), "$2\r\nv3\r\n");
  EXPECT_EQ(run({"SET", "k", "v", "NX", "XX"}), "-ERR syntax error\r\n");
  EXPECT_EQ(run({"SET", "k", "v", "EX", "1", "PX", "5"}), "-ERR syntax error\r\n");
  EXPECT_EQ(run({"SET", "k", "v", "BOGUS"}), "-ERR syntax error\r\n");
}

TEST_F(SessionTest, ExpiryFollowsTheClock) {
  EXPECT_EQ(run({"SET", "k", "v", "EX", "10"}), "+OK\r\n");
  EXPECT_EQ(run({"TTL", "k"}), ":10\r\n");
  EXPECT_EQ(run({"PTTL", "k"}), ":10000\r\n");
  m_now += 9'999;
  EXPECT_EQ(run({"GET", "k"}), "$1\r\nv\r\n");
  m_now += 1;
  EXPECT_EQ(run({"GET", "k"}), "$-1\r\n");
  EXPECT_EQ(run({"TTL", "k"}), ":-2\r\n");

  EXPECT_EQ(run({"SET", "p", "v", "PX", "1500"}), "+OK\r\n");
  EXPECT_EQ(run({"TTL", "p"}), ":2\r\n");  // rounded like redis-server
  EXPECT_EQ(run({"SET", "p", "v2", "KEEPTTL"}), "+OK\r\n");
  EXPECT_EQ(run({"PTTL", "p"}), ":1500\r\n");
  EXPECT_EQ(run({"SET", "p", "v3"}), "+OK\r\n");
  EXPECT_EQ(run({"TTL", "p"}), ":-1\r\n");
  EXPECT_EQ(run({"EXPIRE", "p", "5"}), ":1\r\n");
  EXPECT_EQ(run({"TTL", "p"}), ":5\r\n");
  EXPECT_EQ(run({"EXPIRE", "nope", "5"}), ":0\r\n");
  EXPECT_EQ(run({"EXPIRE", "p", "0"}), ":1\r\n");  // a past deadline deletes
  EXPECT_EQ(run({"EXISTS", "p"}), ":0\r\n");
}

TEST_F(SessionTest, BadExpiryArguments) {
  EXPECT_EQ(run({"SET", "k", "v", "EX", "abc"}),
            "-ERR value is not an integer or out of range\r\n");
  EXPECT_EQ(run({"SET", "k", "v", "EX", "0"}), "-ERR invalid expire time in 'set' command\r\n");
  EXPECT_EQ(run({"SET", "k", "v", "PX", "-5"}), "-ERR invalid expire time in 'set' command\r\n");
  EXPECT_EQ(run({"SET", "k", "v", "EX", "9223372036854775807"}),
            "-ERR invalid expire time in 'set' command\r\n");
  EXPECT_EQ(run({"SET", "k", "v", "EX"}), "-ERR syntax error\r\n");
  EXPECT_EQ(run({"EXPIRE", "k", "x"}), "-ERR value is not an integer or out of range\r\n");
  EXPECT_EQ(run({"EXISTS", "k"}), ":0\r\n");
}

TEST_F(SessionTest, SelectClientHelloCommandInfo) {
  EXPECT_EQ(run({"SELECT", "0"}), "+OK\r\n");
  EXPECT_EQ(run({"SELECT", "1"}), "-ERR DB index is out of range\r\n");
  EXPECT_EQ(run({"CLIENT", "GETNAME"}), "$-1\r\n");
  EXPECT_EQ(run({"CLIENT", "SETNAME", "rank0"}), "+OK\r\n");
  EXPECT_EQ(run({"client", "getname"}), "$5\r\nrank0\r\n");
  EXPECT_EQ(run({"CLIENT", "SETNAME", "a b"}),
            "-ERR Client names cannot contain spaces, newlines or special characters.\r\n");
  EXPECT_EQ(run({"CLIENT", "SETINFO", "lib-name", "redis-py"}), "+OK\r\n");
  EXPECT_EQ(run({"CLIENT", "ID"}), ":" + std::to_string(m_session.id()) + "\r\n");
  EXPECT_EQ(run({"CLIENT", "KILL"}), "-ERR unknown subcommand 'KILL'. Try CLIENT HELP.\r\n");
  EXPECT_EQ(run({"HELLO", "4"}), "-NOPROTO unsupported protocol version\r\n");
  std::string hello = run({"HELLO", "2"});
  EXPECT_EQ(hello.rfind("*14\r\n$6\r\nserver\r\n$5\r\nredis\r\n", 0), 0u) << hello;
  EXPECT_NE(hello.find("$5\r\nproto\r\n:2\r\n"), std::string::npos);
  EXPECT_EQ(run({"COMMAND", "DOCS"}), "*0\r\n");
  EXPECT_EQ(run({"COMMAND", "COUNT"}).substr(0, 1), ":");
  EXPECT_NE(run({"INFO"}).find("redis_version:"), std::string::npos);
  EXPECT_EQ(run({"QUIT"}), "+OK\r\n");
  EXPECT_TRUE(m_session.quit_requested());
}

// redis-py 5+ opens with HELLO 3 (Inductor's and Triton's remote caches use
// it): the reply is a map, and nulls are RESP3's `_`.
TEST_F(SessionTest, Resp3AfterHello3) {
  EXPECT_EQ(run({"GET", "missing"}), "$-1\r\n");
  std::string hello = run({"HELLO", "3"});
  EXPECT_EQ(hello.rfind("%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n", 0), 0u) << hello;
  EXPECT_NE(hello.find("$5\r\nproto\r\n:3\r\n"), std::string::npos);
  EXPECT_EQ(run({"GET", "missing"}), "_\r\n");
  EXPECT_EQ(run({"MGET", "missing", "missing"}), "*2\r\n_\r\n_\r\n");
  EXPECT_EQ(run({"SET", "k", "v", "NX"}), "+OK\r\n");
  EXPECT_EQ(run({"SET", "k", "w", "NX"}), "_\r\n");
  EXPECT_EQ(run({"GET", "k"}), "$1\r\nv\r\n");
  EXPECT_EQ(run({"HELLO", "2"}).substr(0, 5), "*14\r\n");
  EXPECT_EQ(run({"GET", "missing"}), "$-1\r\n");
}

class AuthSessionTest : public SessionTest {
 protected:
  AuthSessionTest() : SessionTest("s3cret") {}
};

TEST_F(AuthSessionTest, EverythingButAuthHelloQuitNeedsAuth) {
  EXPECT_EQ(run({"GET", "k"}), "-NOAUTH Authentication required.\r\n");
  EXPECT_EQ(run({"PING"}), "-NOAUTH Authentication required.\r\n");
  EXPECT_EQ(run({"HELLO", "2"}).substr(0, 8), "-NOAUTH ");
  EXPECT_EQ(run({"AUTH", "wrong"}),
            "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
  EXPECT_EQ(run({"AUTH", "s3cre"}),
            "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
  EXPECT_EQ(run({"AUTH", "other", "s3cret"}),
            "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
  EXPECT_EQ(run({"AUTH", "default", "s3cret"}), "+OK\r\n");
  EXPECT_EQ(run({"SET", "k", "v"}), "+OK\r\n");
}

TEST_F(AuthSessionTest, HelloCanAuthenticate) {
  EXPECT_EQ(run({"HELLO", "2", "AUTH", "default", "s3cret", "SETNAME", "x"}).substr(0, 4), "*14\r");
  EXPECT_EQ(run({"CLIENT", "GETNAME"}), "$1\r\nx\r\n");
}

// Issue 23: wrong passwords were limited per connection only, so a client
// that reconnects could guess thousands a second. The budget is front-wide:
// 10 wrong passwords on any connections, then AUTH (even the right password,
// so guessing learns nothing) is refused for 1 s, then 2 s, ... up to 60 s.
TEST_F(AuthSessionTest, WrongPasswordsOnAnyConnectionsLockAuthFrontWide) {
  const std::string wrong = "-WRONGPASS invalid username-password pair or user is disabled.\r\n";
  auto attempt = [&](const std::string& password) {
    Session fresh(
        m_shared);  // a new connection for every try: the per-connection limit never bites
    std::vector<std::string> argv{"AUTH", password};
    std::string out;
    fresh.execute(argv, out);
    return out;
  };
  for (int i = 0; i < AuthBudget::kFailures; ++i)
    EXPECT_EQ(attempt("guess" + std::to_string(i)), wrong) << i;
  EXPECT_EQ(attempt("s3cret"),
            "-ERR too many wrong AUTH passwords on this ccpool front; AUTH is refused for 1000 ms "
            "more\r\n");
  m_now += 999;
  EXPECT_EQ(attempt("s3cret").substr(0, 40), "-ERR too many wrong AUTH passwords on th");
  m_now += 1;
  EXPECT_EQ(attempt("s3cret"), "+OK\r\n");
  // The next lockout lasts twice as long; the ones after double up to 60 s.
  for (int i = 0; i < AuthBudget::kFailures; ++i) EXPECT_EQ(attempt("again"), wrong);
  EXPECT_EQ(attempt("s3cret"),
            "-ERR too many wrong AUTH passwords on this ccpool front; AUTH is refused for 2000 ms "
            "more\r\n");
  int64_t lockout = 2000;
  for (int round = 0; round < 8; ++round) {
    m_now += lockout;
    for (int i = 0; i < AuthBudget::kFailures; ++i) EXPECT_EQ(attempt("again"), wrong);
    lockout = std::min<int64_t>(lockout * 2, AuthBudget::kMaxLockoutMs);
    EXPECT_EQ(attempt("s3cret"),
              "-ERR too many wrong AUTH passwords on this ccpool front; AUTH is refused for " +
                  std::to_string(lockout) + " ms more\r\n");
  }
  EXPECT_EQ(lockout, 60'000);
  EXPECT_EQ(m_shared.auth_budget.lockouts(), 10u);
  // A refusal during a lockout counts towards the connection's own limit (HELLO AUTH too).
  Session one(m_shared);
  for (int i = 0; i < kMaxAuthFailures; ++i) {
    std::vector<std::string> argv{"HELLO", "2", "AUTH", "default", "s3cret"};
    std::string out;
    one.execute(argv, out);
    EXPECT_EQ(out.substr(0, 40), "-ERR too many wrong AUTH passwords on th");
  }
  EXPECT_TRUE(one.quit_requested());
  // Ten quiet minutes forget the history: the next lockout is 1 s again.
  m_now += AuthBudget::kForgetMs + 60'000;
  for (int i = 0; i < AuthBudget::kFailures; ++i) EXPECT_EQ(attempt("later"), wrong);
  EXPECT_EQ(attempt("s3cret"),
            "-ERR too many wrong AUTH passwords on this ccpool front; AUTH is refused for 1000 ms "
            "more\r\n");
}

TEST_F(SessionTest, AuthWithoutPasswordConfiguredIsAnError) {
  EXPECT_EQ(run({"AUTH", "x"}).substr(0, 51),
            "-ERR AUTH <password> called without any password co");
}

}  // namespace
}  // namespace ccpool::resp
