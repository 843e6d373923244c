// The front over real sockets, in process: pipelining, concurrency, malformed
// input, limits, the socket file, and peer-uid refusal.
#include "resp/front.h"

#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "resp/peer.h"
#include "tests/resp/socket_client.h"
#include "tests/support/scratch.h"

namespace ccpool::resp {
namespace {

using namespace ccpool::resp::testing;

class FrontTest : public ::testing::Test {
 protected:
  void start(FrontOptions options = {}) {
    if (options.unix_path.empty())
      options.unix_path = ccpool::testing::scratch_dir() + "/resp.sock";
    if (options.tcp_port == 0) options.tcp_port = -1;
    auto front = Front::start(options, m_kv);
    ASSERT_TRUE(front.has_value()) << front.error().message;
    m_front = std::move(*front);
  }

  InMemoryKv m_kv;
  std::unique_ptr<Front> m_front;
};

TEST_F(FrontTest, PipelinedCommandsAnswerInOrder) {
  start();
  UniqueFd fd = connect_unix(m_front->unix_path());
  ASSERT_TRUE(fd);
  std::string request, expected;
  for (int i = 0; i < 1000; ++i) {
    std::string key = std::to_string(i);
    key.insert(key.begin(), 'k');
    request += command({"SET", key, std::to_string(i)}) + command({"GET", key});
    expected += "+OK\r\n";
    expected += bulk(std::to_string(i));
  }
  request += "PING\r\n";  // inline, as redis-cli sends by hand
  expected += "+PONG\r\n";
  EXPECT_EQ(round_trip(fd.get(), request, expected.size()), expected);
  EXPECT_EQ(m_front->counters().commands, 2001u);
}

TEST_F(FrontTest, SixtyFourConcurrentConnectionsOnBothListeners) {
  start();
  std::vector<std::thread> clients;
  std::vector<int> good(64, 0);
  for (int c = 0; c < 64; ++c) {
    clients.emplace_back([&, c] {
      UniqueFd fd = c % 2 ? connect_unix(m_front->unix_path()) : connect_tcp(m_front->tcp_port());
      if (!fd) return;
      for (int i = 0; i < 50; ++i) {
        std::string key = "c" + std::to_string(c) + ":" + std::to_string(i);
        std::string value(100 + c * 10 + i, static_cast<char>('a' + c % 26));
        if (round_trip(fd.get(), command({"SET", key, value}), 5) != "+OK\r\n") return;
        if (round_trip(fd.get(), command({"GET", key}), bulk(value).size()) != bulk(value)) return;
      }
      good[c] = 1;
    });
  }
  for (auto& t : clients) t.join();
  for (int c = 0; c < 64; ++c) EXPECT_EQ(good[c], 1) << "client " << c;
  EXPECT_EQ(m_kv.size(), 64u * 50u);
  EXPECT_EQ(m_front->counters().connections, 64u);
  EXPECT_EQ(m_front->counters().refused_peers, 0u);
}

TEST_F(FrontTest, ProtocolErrorClosesOnlyThatConnection) {
  start();
  UniqueFd healthy = connect_unix(m_front->unix_path());
  UniqueFd bad = connect_unix(m_front->unix_path());
  ASSERT_TRUE(healthy && bad);
  ASSERT_TRUE(send_all(bad.get(), command({"PING"}) + "*1\r\n$-7\r\n" + command({"PING"})));
  EXPECT_EQ(read_to_close(bad.get()), "+PONG\r\n-ERR Protocol error: invalid bulk length\r\n");
  EXPECT_EQ(round_trip(healthy.get(), command({"PING"}), 7), "+PONG\r\n");
  EXPECT_EQ(m_front->counters().protocol_errors, 1u);
}

// The cross-protocol guard (issue 23). redis-server closes a connection whose
// command is POST or Host: (an HTTP request), without a reply; so does the
// front, on both listeners. On TCP the front also refuses an inline command
// before the connection's first RESP array: a browser or an SSRF can send
// text lines to a loopback port, never a well-formed array first.
TEST_F(FrontTest, HttpRequestsCloseTheConnectionUnexecutedOnBothListeners) {
  start();
  const std::string http =
      "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 20\r\n\r\nSET http 1\r\n" +
      command({"SET", "http2", "1"});
  UniqueFd tcp = connect_tcp(m_front->tcp_port());
  UniqueFd local = connect_unix(m_front->unix_path());
  ASSERT_TRUE(tcp && local);
  ASSERT_TRUE(send_all(tcp.get(), http));
  ASSERT_TRUE(send_all(local.get(), http));
  EXPECT_EQ(read_to_close(tcp.get()), "");
  EXPECT_EQ(read_to_close(local.get()), "");
  // A Host: line after well-formed commands closes too (redis-server checks every command).
  UniqueFd later = connect_tcp(m_front->tcp_port());
  ASSERT_TRUE(send_all(later.get(),
                       command({"PING"}) + "Host: example\r\n" + command({"SET", "http3", "1"})));
  EXPECT_EQ(read_to_close(later.get()), "+PONG\r\n");
  EXPECT_EQ(m_kv.size(), 0u);
  EXPECT_EQ(m_front->counters().cross_protocol, 3u);
  EXPECT_EQ(m_front->counters().commands, 1u);
}

TEST_F(FrontTest, OnTcpNoInlineCommandBeforeTheFirstArray) {
  start();
  UniqueFd first_inline = connect_tcp(m_front->tcp_port());
  ASSERT_TRUE(first_inline);
  ASSERT_TRUE(send_all(first_inline.get(),
                       "PUT / HTTP/1.0\r\nSET put 1\r\n" + command({"SET", "put2", "1"})));
  std::string refused = read_to_close(first_inline.get());
  EXPECT_EQ(refused.rfind("-ERR ccpool front: ", 0), 0u) << refused;
  EXPECT_EQ(m_kv.size(), 0u);
  EXPECT_EQ(m_front->counters().cross_protocol, 1u);
  // After an array command, inline commands are served (redis-cli typed by hand, keep-alives).
  UniqueFd resp_first = connect_tcp(m_front->tcp_port());
  ASSERT_TRUE(resp_first);
  EXPECT_EQ(round_trip(resp_first.get(), command({"PING"}) + "SET ok 1\r\n", 12),
            "+PONG\r\n+OK\r\n");
  // The Unix socket (mode 0600, same uid only, unreachable from a browser) takes inline commands
  // first.
  UniqueFd local = connect_unix(m_front->unix_path());
  ASSERT_TRUE(local);
  EXPECT_EQ(round_trip(local.get(), "PING\r\n", 7), "+PONG\r\n");
  EXPECT_EQ(m_front->counters().cross_protocol, 1u);
}

TEST_F(FrontTest, HugeDeclaredLengthThenCloseLeavesTheFrontServing) {
  start();
  {
    UniqueFd fd = connect_tcp(m_front->tcp_port());
    ASSERT_TRUE(send_all(fd.get(), "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$200000000\r\nshort"));
  }  // closed mid-bulk
  UniqueFd fd = connect_tcp(m_front->tcp_port());
  EXPECT_EQ(round_trip(fd.get(), command({"EXISTS", "k"}), 4), ":0\r\n");
}

TEST_F(FrontTest, ValueOverTheLimitIsRefusedAndTheConnectionContinues) {
  FrontOptions options;
  options.max_value = 1024;
  start(options);
  UniqueFd fd = connect_unix(m_front->unix_path());
  std::string expected = "-ERR value too large\r\n+OK\r\n" + bulk("small");
  std::string request = command({"SET", "big", std::string(5000, 'x')}) +
                        command({"SET", "s", "small"}) + command({"GET", "s"});
  EXPECT_EQ(round_trip(fd.get(), request, expected.size()), expected);
  EXPECT_FALSE(m_kv.exists("big"));
}

TEST_F(FrontTest, LargeRepliesToAClientThatReadsLate) {
  start();
  std::string value(1 << 20, 'v');
  m_kv.set("big", value, 0);
  UniqueFd fd = connect_unix(m_front->unix_path());
  std::string request;
  for (int i = 0; i < 24; ++i)
    request += command({"GET", "big"});  // 24 MiB of replies, past the high-water mark
  ASSERT_TRUE(send_all(fd.get(), request));
  shutdown(fd.get(), SHUT_WR);  // half-close: every reply must still arrive
  std::string got = read_to_close(fd.get());
  ASSERT_EQ(got.size(), 24 * bulk(value).size());
  EXPECT_EQ(got.substr(0, 20), bulk(value).substr(0, 20));
}

TEST_F(FrontTest, QuitRepliesThenCloses) {
  start();
  UniqueFd fd = connect_unix(m_front->unix_path());
  ASSERT_TRUE(send_all(fd.get(), command({"QUIT"}) + command({"PING"})));
  EXPECT_EQ(read_to_close(fd.get()), "+OK\r\n");
}

TEST_F(FrontTest, ConnectionsOverTheLimitAreRefused) {
  FrontOptions options;
  options.max_connections = 2;
  start(options);
  UniqueFd a = connect_unix(m_front->unix_path());
  UniqueFd b = connect_unix(m_front->unix_path());
  EXPECT_EQ(round_trip(a.get(), command({"PING"}), 7), "+PONG\r\n");
  EXPECT_EQ(round_trip(b.get(), command({"PING"}), 7), "+PONG\r\n");
  UniqueFd c = connect_unix(m_front->unix_path());
  EXPECT_EQ(read_to_close(c.get()), "-ERR max number of clients reached\r\n");
  EXPECT_EQ(m_front->counters().refused_peers, 1u);
}

TEST_F(FrontTest, SocketFileIsPrivateReplacedWhenStaleAndRemovedOnStop) {
  std::string path = ccpool::testing::scratch_dir() + "/resp.sock";
  {
    UniqueFd stale(
        socket(AF_UNIX, SOCK_STREAM, 0));  // bound, never listening: a crashed front's file
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    ASSERT_EQ(bind(stale.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  }
  FrontOptions options;
  options.unix_path = path;
  start(options);
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto second = Front::start(options, m_kv);
  ASSERT_FALSE(second.has_value());
  EXPECT_NE(second.error().message.find("already serves"), std::string::npos)
      << second.error().message;
  m_front.reset();
  EXPECT_FALSE(path_exists(path));
}

TEST(FrontOptionsTest, BadOptionsAreRefusedWithTheFix) {
  InMemoryKv kv;
  FrontOptions none;
  EXPECT_EQ(Front::start(none, kv).error().code, ErrorCode::kInvalidArgument);
  FrontOptions long_path;
  long_path.unix_path = "/tmp/" + std::string(200, 'x');
  auto result = Front::start(long_path, kv);
  ASSERT_FALSE(result.has_value());
  EXPECT_NE(result.error().message.find("use a shorter state dir"), std::string::npos);
}

TEST(PeerTest, TcpPeerUidIsOurs) {
  InMemoryKv kv;
  FrontOptions options;
  options.tcp_port = -1;
  auto front = Front::start(options, kv);
  ASSERT_TRUE(front.has_value()) << front.error().message;
  UniqueFd client = connect_tcp((*front)->tcp_port());
  EXPECT_EQ(round_trip(client.get(), command({"PING"}), 7), "+PONG\r\n");
  EXPECT_EQ((*front)->counters().refused_peers, 0u);
}

TEST(PeerTest, ProcNetTcpLineOfThePeerNamesItsUid) {
  sockaddr_in peer{}, local{};
  peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  peer.sin_port = htons(40000);
  local.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  local.sin_port = htons(6379);
  std::string table =
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout "
      "inode\n"
      "   0: 0100007F:18EB 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 "
      "1 1\n"
      "   1: 0100007F:18EB 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 "
      "2 1\n"
      "   2: 0100007F:9C40 0100007F:18EB 01 00000000:00000000 00:00000000 00000000  1234        0 "
      "3 1\n";
  auto uid = uid_from_proc_net_tcp(table, peer, local);
  ASSERT_TRUE(uid.has_value()) << uid.error().message;
  EXPECT_EQ(*uid, 1234u);
  peer.sin_port = htons(40001);
  EXPECT_EQ(uid_from_proc_net_tcp(table, peer, local).error().code, ErrorCode::kNotFound);
}

// Forks a child that drops to uid/gid 65534 and sends PING. Only syscalls in
// the child (the parent has threads). Exit: 0 PONG, 1 refused or closed,
// 3 NOAUTH, 2 could not connect.
int ping_as_nobody(const sockaddr* addr, socklen_t len, int family, const char* extra) {
  pid_t pid = fork();
  if (pid == 0) {
    if (setgroups(0, nullptr) != 0 || setresgid(65534, 65534, 65534) != 0 ||
        setresuid(65534, 65534, 65534) != 0) {
      _exit(4);
    }
    int fd = socket(family, SOCK_STREAM, 0);
    if (connect(fd, addr, len) != 0) _exit(2);
    if (extra) [[maybe_unused]]
      ssize_t w = send(fd, extra, strlen(extra), MSG_NOSIGNAL);
    const char ping[] =
        "*1\r\n$4\r\nPING\r\n";  // an array, as Redis clients send (TCP refuses inline first)
    [[maybe_unused]] ssize_t w = send(fd, ping, sizeof(ping) - 1, MSG_NOSIGNAL);
    char reply[256] = {};
    size_t got = 0;
    while (got < sizeof(reply) - 1) {
      ssize_t n = recv(fd, reply + got, sizeof(reply) - 1 - got, 0);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
      if (strstr(reply, "+PONG\r\n")) _exit(0);
      if (strstr(reply, "-NOAUTH")) _exit(3);
    }
    _exit(1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void require_root() {
  if (geteuid() != 0) {
    std::fprintf(stderr, "SKIP: cross-uid tests need root to run a client as uid 65534\n");
    std::exit(125);
  }
}

TEST(CrossUidTest, OtherUidIsRefusedOnUnixSocketAndTcp) {
  require_root();
  std::string dir = ccpool::testing::scratch_dir();
  chmod(dir.c_str(), 0755);
  InMemoryKv kv;
  FrontOptions options;
  options.unix_path = dir + "/resp.sock";
  options.tcp_port = -1;
  auto front = Front::start(options, kv);
  ASSERT_TRUE(front.has_value()) << front.error().message;

  sockaddr_un un{};
  un.sun_family = AF_UNIX;
  std::strncpy(un.sun_path, options.unix_path.c_str(), sizeof(un.sun_path) - 1);
  // 0600: the filesystem already stops uid 65534.
  EXPECT_EQ(ping_as_nobody(reinterpret_cast<sockaddr*>(&un), sizeof(un), AF_UNIX, nullptr), 2);
  // Opened up, SO_PEERCRED is what refuses.
  chmod(options.unix_path.c_str(), 0666);
  EXPECT_EQ(ping_as_nobody(reinterpret_cast<sockaddr*>(&un), sizeof(un), AF_UNIX, nullptr), 1);
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_port = htons(static_cast<uint16_t>((*front)->tcp_port()));
  in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(ping_as_nobody(reinterpret_cast<sockaddr*>(&in), sizeof(in), AF_INET, nullptr), 1);
  EXPECT_EQ((*front)->counters().refused_peers, 2u);
  // Our own uid still gets in on both.
  UniqueFd mine = connect_tcp((*front)->tcp_port());
  EXPECT_EQ(round_trip(mine.get(), command({"PING"}), 7), "+PONG\r\n");
}

// Before AUTH (CVE-2021-32675 in redis-server): small requests only, a few
// password guesses per connection, a bounded number of such connections.
class PreAuthTest : public FrontTest {
 protected:
  void SetUp() override {
    FrontOptions options;
    options.password = "pw";
    options.max_unauthenticated = 4;
    start(options);
  }
  UniqueFd open() { return connect_unix(m_front->unix_path()); }
};

TEST_F(PreAuthTest, RequestsBeforeAuthAreSmall) {
  UniqueFd many = open();
  send_all(many.get(), "*" + std::to_string(kPreAuthMaxArgs + 1) + "\r\n");
  EXPECT_EQ(read_to_close(many.get()), "-ERR Protocol error: invalid multibulk length\r\n");
  UniqueFd big = open();
  send_all(big.get(), "*2\r\n$4\r\nAUTH\r\n$100000\r\n" + std::string(100000, 'x') + "\r\n");
  EXPECT_EQ(read_to_close(big.get()), "-ERR value too large\r\n");
  UniqueFd line = open();
  send_all(line.get(),
           "AUTH " + std::string(3 * kPreAuthMaxBytes, 'x'));  // no newline: it would wait
  EXPECT_EQ(read_to_close(line.get()),
            "-ERR Protocol error: unauthenticated request too large\r\n");
  EXPECT_EQ(m_front->counters().protocol_errors, 3u);
  // Authenticated, the same connection takes big values again.
  UniqueFd good = open();
  std::string value(100000, 'v');
  EXPECT_EQ(round_trip(good.get(), command({"AUTH", "pw"}) + command({"SET", "k", value}), 10),
            "+OK\r\n+OK\r\n");
  EXPECT_EQ(round_trip(good.get(), command({"GET", "k"}), bulk(value).size()), bulk(value));
}

TEST_F(PreAuthTest, ThirdWrongPasswordClosesTheConnection) {
  UniqueFd fd = open();
  std::string wrong = command({"AUTH", "nope"});
  send_all(fd.get(), wrong + wrong + wrong + wrong);
  std::string wrongpass = "-WRONGPASS invalid username-password pair or user is disabled.\r\n";
  EXPECT_EQ(read_to_close(fd.get()), wrongpass + wrongpass + wrongpass);
}

TEST_F(PreAuthTest, UnauthenticatedConnectionsAreBounded) {
  const std::string noauth = "-NOAUTH Authentication required.\r\n";
  std::vector<UniqueFd> waiting;
  for (int i = 0; i < 4; ++i) {
    waiting.push_back(open());
    EXPECT_EQ(round_trip(waiting.back().get(), command({"PING"}), noauth.size()), noauth);
  }
  UniqueFd fifth = open();
  EXPECT_EQ(read_to_close(fifth.get()), "-ERR max number of unauthenticated clients reached\r\n");
  EXPECT_EQ(round_trip(waiting[0].get(), command({"AUTH", "pw"}), 5), "+OK\r\n");
  UniqueFd sixth = open();  // one slot came free
  EXPECT_EQ(round_trip(sixth.get(), command({"AUTH", "pw"}), 5), "+OK\r\n");
  EXPECT_EQ(m_front->counters().refused_peers, 1u);
}

TEST(CrossUidTest, OtherUidOnTcpGetsInOnlyWithThePassword) {
  require_root();
  InMemoryKv kv;
  FrontOptions options;
  options.unix_path = ccpool::testing::scratch_dir() + "/resp.sock";
  options.tcp_port = -1;
  options.password = "pw";
  auto front = Front::start(options, kv);
  ASSERT_TRUE(front.has_value()) << front.error().message;
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_port = htons(static_cast<uint16_t>((*front)->tcp_port()));
  in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(ping_as_nobody(reinterpret_cast<sockaddr*>(&in), sizeof(in), AF_INET, nullptr), 3);
  EXPECT_EQ(ping_as_nobody(reinterpret_cast<sockaddr*>(&in), sizeof(in), AF_INET,
                           "*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n"),
            0);
  EXPECT_EQ((*front)->counters().refused_peers, 0u);
}

}  // namespace
}  // namespace ccpool::resp
