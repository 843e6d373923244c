#include "ipc/socket.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <thread>

#include "tests/support/scratch.h"

namespace ccpool::ipc {
namespace {

using std::chrono::milliseconds;

struct Pair {
  UniqueFd a, b;
};
Pair socket_pair() {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
  return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

// Accepts one connection and answers every Ping with a Pong until EOF.
void serve_pings(int listen_fd, int count) {
  pollfd p{listen_fd, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 10000), 1);
  UniqueFd conn(::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(conn);
  FrameReader reader;
  for (int i = 0; i < count; ++i) {
    auto m = recv_message(conn.get(), reader, deadline_in(milliseconds(10000)));
    ASSERT_TRUE(m) << m.error().message;
    ASSERT_TRUE(std::holds_alternative<Ping>(*m));
    ASSERT_TRUE(send_message(conn.get(), Pong{}, deadline_in(milliseconds(10000))));
  }
}

TEST(Socket, ListenConnectRoundTrips) {
  std::string path = ccpool::testing::scratch_dir() + "/s";
  auto listener = listen_unix(path);
  ASSERT_TRUE(listener) << listener.error().message;
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::thread server(serve_pings, listener->get(), 100);
  auto conn = connect_unix(path, deadline_in(milliseconds(5000)));
  ASSERT_TRUE(conn) << conn.error().message;
  FrameReader reader;
  int pongs = 0;
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(send_message(conn->get(), Ping{}, deadline_in(milliseconds(5000))));
    auto m = recv_message(conn->get(), reader, deadline_in(milliseconds(5000)));
    ASSERT_TRUE(m) << m.error().message;
    pongs += std::holds_alternative<Pong>(*m);
  }
  server.join();
  EXPECT_EQ(pongs, 100);
}

TEST(Socket, MissingSocketIsUnreachable) {
  auto conn =
      connect_unix(ccpool::testing::scratch_dir() + "/nothing", deadline_in(milliseconds(500)));
  ASSERT_FALSE(conn);
  EXPECT_EQ(conn.error().code, ErrorCode::kUnreachable);
  EXPECT_NE(conn.error().message.find("/nothing"), std::string::npos);
}

TEST(Socket, StaleSocketIsUnreachableAndReused) {
  std::string path = ccpool::testing::scratch_dir() + "/s";
  {
    auto first = listen_unix(path);
    ASSERT_TRUE(first);
  }  // closed: the file stays behind
  auto conn = connect_unix(path, deadline_in(milliseconds(500)));
  ASSERT_FALSE(conn);
  EXPECT_EQ(conn.error().code, ErrorCode::kUnreachable);
  auto second = listen_unix(path);
  ASSERT_TRUE(second) << second.error().message;
  // A live listener is not stolen.
  auto third = listen_unix(path);
  ASSERT_FALSE(third);
  EXPECT_EQ(third.error().code, ErrorCode::kUnsupported);
}

TEST(Socket, NonSocketFileIsNotRemoved) {
  std::string path = ccpool::testing::scratch_dir() + "/f";
  ASSERT_TRUE(write_file_atomic(path, "data", 0600));
  auto listener = listen_unix(path);
  ASSERT_FALSE(listener);
  EXPECT_EQ(listener.error().code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(path_exists(path));
}

TEST(Socket, TooLongPathIsRefused) {
  auto listener = listen_unix("/tmp/" + std::string(200, 'x'));
  ASSERT_FALSE(listener);
  EXPECT_EQ(listener.error().code, ErrorCode::kInvalidArgument);
}

TEST(Socket, RecvTimesOut) {
  Pair p = socket_pair();
  FrameReader reader;
  auto m = recv_message(p.a.get(), reader, deadline_in(milliseconds(30)));
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, ErrorCode::kTimeout);
  // A half-sent frame also times out rather than hang.
  std::string frame = encode(StatusReply{"abc"});
  ASSERT_EQ(::write(p.b.get(), frame.data(), 5), 5);
  m = recv_message(p.a.get(), reader, deadline_in(milliseconds(30)));
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, ErrorCode::kTimeout);
  EXPECT_EQ(reader.buffered(), 5u);
}

TEST(Socket, SendTimesOutWhenPeerDoesNotRead) {
  Pair p = socket_pair();
  StatusReply big{std::string(8u << 20, 'x')};  // far more than the socket buffer
  auto sent = send_message(p.a.get(), big, deadline_in(milliseconds(50)));
  ASSERT_FALSE(sent);
  EXPECT_EQ(sent.error().code, ErrorCode::kTimeout);
}

TEST(Socket, PeerCloseIsUnreachable) {
  Pair p = socket_pair();
  p.b.reset();
  FrameReader reader;
  auto m = recv_message(p.a.get(), reader, deadline_in(milliseconds(1000)));
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, ErrorCode::kUnreachable);
  auto sent = send_message(p.a.get(), Ping{}, deadline_in(milliseconds(1000)));
  ASSERT_FALSE(sent);
  EXPECT_EQ(sent.error().code, ErrorCode::kUnreachable);
}

TEST(Socket, GarbageFromPeerIsProtocolError) {
  Pair p = socket_pair();
  ASSERT_EQ(::write(p.b.get(), "HELLO", 5), 5);
  FrameReader reader;
  auto m = recv_message(p.a.get(), reader, deadline_in(milliseconds(1000)));
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, ErrorCode::kProtocol);
}

TEST(Socket, PeerCredentialsAreOurs) {
  Pair p = socket_pair();
  auto cred = peer_credentials(p.a.get());
  ASSERT_TRUE(cred) << cred.error().message;
  EXPECT_EQ(cred->uid, ::getuid());
  EXPECT_EQ(cred->gid, ::getgid());
  EXPECT_EQ(cred->pid, ::getpid());
}

}  // namespace
}  // namespace ccpool::ipc
