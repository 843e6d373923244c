// What a hostile Redis server (or a man in the middle) can make a node do
// (issue 23). The server here is a loopback listener that answers every
// command with a script: a bulk that claims 700 MiB and streams it, an array
// of 8 M elements, a reply trickled one byte at a time. Each must cost the
// node a bounded amount of memory and time, count as a remote error, and
// return a miss (the caller then compiles locally).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "base/fs.h"
#include "base/hash.h"
#include "remote/reply_reader.h"
#include "remote/tier.h"
#include "tests/support/peak_rss.h"

namespace ccpool::remote {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

// Accepts connections on 127.0.0.1:<ephemeral>; on each, waits for the first
// bytes of a command and then runs `script(fd)`, which writes what it likes
// until it returns or a send fails (the client hung up). Counts bytes sent.
class HostileServer {
 public:
  using Script = std::function<void(HostileServer&, int fd)>;

  explicit HostileServer(Script script) : m_script(std::move(script)) {
    m_listener.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(m_listener.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        ::listen(m_listener.get(), 16) != 0 ||
        ::getsockname(m_listener.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      return;
    }
    m_port = ntohs(addr.sin_port);
    m_thread = std::thread([this] { serve(); });
  }
  ~HostileServer() {
    m_stop = true;
    ::shutdown(m_listener.get(), SHUT_RDWR);
    if (m_thread.joinable()) m_thread.join();
  }

  std::string url() const { return "redis://127.0.0.1:" + std::to_string(m_port); }
  int port() const { return m_port; }
  uint64_t sent() const { return m_sent; }
  uint64_t commands() const { return m_commands; }
  bool stopping() const { return m_stop; }

  // Sends all of `bytes`; false once the client is gone (or the test ends).
  bool send_bytes(int fd, std::string_view bytes) {
    while (!bytes.empty() && !m_stop) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n <= 0) return false;
      m_sent += static_cast<uint64_t>(n);
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return !m_stop;
  }

 private:
  void serve() {
    while (!m_stop) {
      int fd = ::accept4(m_listener.get(), nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      UniqueFd conn(fd);
      char buf[4096];
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 10'000) <= 0 || ::recv(fd, buf, sizeof buf, 0) <= 0) continue;
      ++m_commands;
      m_script(*this, fd);
    }
  }

  Script m_script;
  UniqueFd m_listener;
  int m_port = 0;
  std::atomic<bool> m_stop{false};
  std::atomic<uint64_t> m_sent{0};
  std::atomic<uint64_t> m_commands{0};
  std::thread m_thread;
};

RemoteOptions hostile_options(const HostileServer& server) {
  RemoteOptions o;
  o.url = server.url();
  o.connect_timeout = std::chrono::milliseconds(2000);
  o.op_timeout = std::chrono::milliseconds(300);
  o.max_value = kMiB;
  o.breaker_failures = 100;  // every call reaches the server
  return o;
}

std::unique_ptr<Tier> make_tier(const RemoteOptions& o) {
  auto tier = Tier::create(o);
  EXPECT_TRUE(tier) << tier.error().message;
  return tier ? std::move(*tier) : nullptr;
}

// Claims a bulk of 700 MiB and streams it (in 1 MiB writes) until the client hangs up.
void huge_bulk(HostileServer& server, int fd) {
  if (!server.send_bytes(fd, "$734003200\r\n")) return;
  std::string chunk(kMiB, 'x');
  for (int i = 0; i < 700 && server.send_bytes(fd, chunk); ++i) {
  }
}

// An array of 8 M integers: 32 MiB on the wire, far more as reply objects.
void huge_array(HostileServer& server, int fd) {
  if (!server.send_bytes(fd, "*8000000\r\n")) return;
  std::string chunk;
  for (int i = 0; i < 65536; ++i) chunk += ":1\r\n";
  for (int sent = 0; sent < 8000000 && server.send_bytes(fd, chunk); sent += 65536) {
  }
}

TEST(HostileRedis, AHugeBulkIsRefusedBeforeItIsBuffered) {
  HostileServer server(huge_bulk);
  ASSERT_GT(server.port(), 0);
  auto tier = make_tier(hostile_options(server));
  std::optional<std::string> got;
  uint64_t growth = ccpool::testing::peak_rss_growth([&] { got = tier->get(hash_bytes("k")); });
  ASSERT_NE(growth, UINT64_MAX) << "cannot reset the peak RSS (/proc/self/clear_refs)";
  EXPECT_FALSE(got);
  EXPECT_EQ(tier->counters().errors, 1u);
  EXPECT_EQ(tier->counters().hits, 0u);
  EXPECT_LT(growth, 16 * kMiB);
  // The client hung up at the header: what was sent is what the socket buffers took.
  EXPECT_LT(server.sent(), 64 * kMiB);
}

TEST(HostileRedis, AHugeArrayIsRefusedBeforeItIsBuffered) {
  HostileServer server(huge_array);
  ASSERT_GT(server.port(), 0);
  auto tier = make_tier(hostile_options(server));
  std::optional<std::string> got, waited;
  uint64_t growth = ccpool::testing::peak_rss_growth([&] {
    got = tier->get(hash_bytes("k"));
    // The lease poll reads an array of two: eight million are refused too.
    waited = tier->wait_for_result(hash_bytes("k"), std::chrono::milliseconds(2000));
  });
  ASSERT_NE(growth, UINT64_MAX) << "cannot reset the peak RSS (/proc/self/clear_refs)";
  EXPECT_FALSE(got);
  EXPECT_FALSE(waited);
  EXPECT_EQ(tier->counters().errors, 2u);
  EXPECT_LT(growth, 16 * kMiB);
}

// 1,000 bytes promised, one sent every 20 ms: each read is quick, the whole
// reply would take 20 s. The deadline is per operation (op_timeout 300 ms plus
// the transfer allowance), so the client hangs up after a few bytes.
TEST(HostileRedis, ATrickledReplyEndsAtTheOperationDeadline) {
  HostileServer server([](HostileServer& s, int fd) {
    if (!s.send_bytes(fd, "$1000\r\n")) return;
    for (int i = 0; i < 1002; ++i) {
      if (!s.send_bytes(fd, "x")) return;
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 20) > 0) {
        char c;
        if (::recv(fd, &c, 1, MSG_DONTWAIT) == 0) return;  // the client hung up
      }
    }
  });
  ASSERT_GT(server.port(), 0);
  RemoteOptions o = hostile_options(server);
  auto tier = make_tier(o);
  EXPECT_FALSE(tier->get(hash_bytes("k")));
  EXPECT_EQ(tier->counters().errors, 1u);
  // op_timeout / 20 ms = 15 bytes of value, plus the header and a little slack
  // for a loaded machine; the whole reply is 1,009 bytes.
  EXPECT_LT(server.sent(), 200u);
}

// The reader's own bounds, byte by byte as hiredis never did.
TEST(ReplyReader, EachBoundIsCheckedOnTheHeader) {
  auto feed = [](const ReplyLimits& limits, std::string_view bytes) {
    ReplyReader reader(limits);
    bool done = false;
    for (char c : bytes) {  // one byte at a time: the worst case for a reader
      auto r = reader.feed(std::string_view(&c, 1));
      if (!r) return std::string("error: ") + r.error().message;
      done = *r;
    }
    return done ? std::string("reply: ") + reader.take().str : std::string("incomplete");
  };
  ReplyLimits value = ReplyLimits::value(10, 0);
  EXPECT_EQ(feed(value, "$10\r\n0123456789\r\n"), "reply: 0123456789");
  EXPECT_EQ(feed(value, "$11\r\n"),
            "error: reply refused: a bulk of 11 bytes, above the 10 this command may read");
  EXPECT_EQ(feed(value, "*1\r\n"),
            "error: reply refused: an array nested 1 deep, above the 0 this command may read");
  EXPECT_EQ(
      feed(ReplyLimits::value(10, 2), "*3\r\n"),
      "error: reply refused: an array of 3 elements, above the 2 this command may still read");
  EXPECT_EQ(feed(ReplyLimits::value(10, 2), "*2\r\n*1\r\n"),
            "error: reply refused: an array nested 2 deep, above the 1 this command may read");
  EXPECT_EQ(feed(value, "+OK\r\n+OK\r\n"), "error: reply refused: 1 bytes after the reply");
  EXPECT_EQ(
      feed(value, "%1\r\n"),
      "error: reply refused: unexpected type byte 37 (RESP2 '+', '-', ':', '$' or '*' expected)");
  EXPECT_EQ(feed(value, "$-2\r\n"), "error: reply refused: malformed $ header");
  EXPECT_EQ(feed(value, "$3\r\nabcde"), "error: reply refused: a bulk not ended by CRLF");
  EXPECT_EQ(feed(ReplyLimits::small(), "-" + std::string(5000, 'e')),
            "error: reply refused: a line longer than 4096 bytes");
  ReplyLimits tight = ReplyLimits::small();
  tight.max_total = 8;
  EXPECT_EQ(feed(tight, ":123456789\r\n"), "error: reply refused: more than 8 bytes for one reply");
  EXPECT_EQ(feed(ReplyLimits::small(), "$-1\r\n"), "reply: ");
}

TEST(ReplyReader, ThePollScriptsReplyReadsBack) {
  ReplyReader reader(ReplyLimits::value(100, 2));
  auto done = reader.feed("*2\r\n:1\r\n$5\r\nvalue\r\n");
  ASSERT_TRUE(done && *done);
  Reply r = reader.take();
  ASSERT_EQ(r.type, Reply::Type::kArray);
  ASSERT_EQ(r.elements.size(), 2u);
  EXPECT_EQ(r.elements[0].integer, 1);
  EXPECT_EQ(r.elements[1].str, "value");
}

}  // namespace
}  // namespace ccpool::remote
