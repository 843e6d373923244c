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
      : m_kv([this] { return m_now; }), m_shared(m_kv, std::move(password), [this] { return m_now; }),
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
  EXPECT_EQ(run({"foo", "a", "b\r\nc"}), "-ERR unknown command 'foo', with args beginning with: 'a' 'b  c' \r\n");
}

TEST_F(SessionTest, WrongArityUsesRedisText) {
  EXPECT_EQ(run({"GET"}), "-ERR wrong number of arguments for 'get' command\r\n");
  EXPECT_EQ(run({"get", "a", "b"}), "-ERR wrong number of arguments for 'get' command\r\n");
  EXPECT_EQ(run({"SET", "k"}), "-ERR wrong number of arguments for 'set' command\r\n");
  EXPECT_EQ(run({"MSET", "a", "1", "b"}), "-ERR wrong number of arguments for 'mset' command\r\n");
  EXPECT_EQ(run({"ping", "a", "b"}), "-ERR wrong number of arguments for 'ping' command\r\n");
  EXPECT_EQ(run({"CLIENT", "SETNAME"}), "-ERR wrong number of arguments for 'client|setname' command\r\n");
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
  EXPECT_EQ(run({"SET", "k", "v", "EX", "abc"}), "-ERR value is not an integer or out of range\r\n");
  EXPECT_EQ(run({"SET", "k", "v", "EX", "0"}), "-ERR invalid expire time in 'set' command\r\n");
  EXPECT_EQ(run({"SET", "k", "v", "PX", "-5"}), "-ERR invalid expire time in 'set' command\r\n");
  EXPECT_EQ(run({"SET", "k", "v", "EX", "9223372036854775807"}), "-ERR invalid expire time in 'set' command\r\n");
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
  EXPECT_EQ(run({"AUTH", "wrong"}), "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
  EXPECT_EQ(run({"AUTH", "s3cre"}), "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
  EXPECT_EQ(run({"AUTH", "other", "s3cret"}), "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
  EXPECT_EQ(run({"AUTH", "default", "s3cret"}), "+OK\r\n");
  EXPECT_EQ(run({"SET", "k", "v"}), "+OK\r\n");
}

TEST_F(AuthSessionTest, HelloCanAuthenticate) {
  EXPECT_EQ(run({"HELLO", "2", "AUTH", "default", "s3cret", "SETNAME", "x"}).substr(0, 4), "*14\r");
  EXPECT_EQ(run({"CLIENT", "GETNAME"}), "$1\r\nx\r\n");
}

TEST_F(SessionTest, AuthWithoutPasswordConfiguredIsAnError) {
  EXPECT_EQ(run({"AUTH", "x"}).substr(0, 51), "-ERR AUTH <password> called without any password co");
}

}  // namespace
}  // namespace ccpool::resp
