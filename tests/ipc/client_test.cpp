#include "ipc/client.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>

#include "tests/support/scratch.h"

namespace ccpool::ipc {
namespace {

using std::chrono::milliseconds;

// A one-connection fake service: answers Hello with `hello_reply`, then each
// further request with whatever `answer` returns (nullopt: stay silent).
// With `hello_after_first_request`, it answers Hello only once the first
// request has arrived too: a client that waits for hello-ok before sending
// its request times out against it.
class FakeService {
 public:
  using Answer = std::function<std::optional<Message>(const Message&)>;

  FakeService(Message hello_reply, Answer answer, bool hello_after_first_request = false)
      : m_path(ccpool::testing::scratch_dir() + "/s"),
        m_listener(*listen_unix(m_path)),
        m_hello_after_first_request(hello_after_first_request) {
    m_thread = std::thread([this, hello_reply, answer] { run(hello_reply, answer); });
  }
  ~FakeService() {
    ::shutdown(m_listener.get(), SHUT_RDWR);
    m_thread.join();
  }
  const std::string& path() const { return m_path; }
  int requests() const { return m_requests; }

 private:
  void run(const Message& hello_reply, const Answer& answer) {
    pollfd p{m_listener.get(), POLLIN, 0};
    if (::poll(&p, 1, 10000) != 1) return;
    UniqueFd conn(::accept4(m_listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn) return;
    FrameReader reader;
    auto hello = recv_message(conn.get(), reader, deadline_in(milliseconds(5000)));
    if (!hello || !std::holds_alternative<Hello>(*hello)) return;
    std::optional<Result<Message>> first;
    if (m_hello_after_first_request)
      first = recv_message(conn.get(), reader, deadline_in(milliseconds(5000)));
    (void)send_message(conn.get(), hello_reply, deadline_in(milliseconds(5000)));
    for (;;) {
      auto m = first ? std::move(*first)
                     : recv_message(conn.get(), reader, deadline_in(milliseconds(5000)));
      first.reset();
      if (!m) return;
      ++m_requests;
      auto reply = answer(*m);
      if (reply) (void)send_message(conn.get(), *reply, deadline_in(milliseconds(5000)));
    }
  }

  std::string m_path;
  UniqueFd m_listener;
  bool m_hello_after_first_request;
  std::thread m_thread;
  std::atomic<int> m_requests{0};
};

std::optional<Message> answer_normally(const Message& m) {
  if (std::holds_alternative<Ping>(m)) return Pong{};
  if (std::holds_alternative<StatusRequest>(m)) return StatusReply{"{\"jobs\":2}"};
  if (std::holds_alternative<StopRequest>(m)) return StopReply{};
  if (const auto* r = std::get_if<ExecRequest>(&m)) {
    ExecReply reply;
    reply.exit_code = static_cast<int32_t>(r->argv.size());
    reply.stdout_data = r->program;
    reply.stderr_data = r->cwd;
    reply.outcome = CacheOutcome::kHit;
    return reply;
  }
  return ErrorFrame{static_cast<uint16_t>(ErrorCode::kProtocol), "unexpected"};
}

TEST(Client, HandshakeAndEveryRequest) {
  FakeService service(HelloOk{kProtocolVersion, 5, 777}, answer_normally);
  auto client = Client::connect(service.path(), deadline_in(milliseconds(5000)));
  ASSERT_TRUE(client) << client.error().message;
  EXPECT_EQ(client->hello().service_pid, 777);
  EXPECT_EQ(client->hello().capabilities, 5u);
  EXPECT_TRUE(client->ping(deadline_in(milliseconds(5000))));
  auto json = client->status_json(deadline_in(milliseconds(5000)));
  ASSERT_TRUE(json);
  EXPECT_EQ(*json, "{\"jobs\":2}");
  ExecRequest request;
  request.program = "/bin/true";
  request.argv = {"true", "a", "b"};
  request.cwd = "/";
  auto reply = client->exec(request, deadline_in(milliseconds(5000)));
  ASSERT_TRUE(reply) << reply.error().message;
  EXPECT_EQ(reply->exit_code, 3);
  EXPECT_EQ(reply->stdout_data, "/bin/true");
  EXPECT_EQ(reply->stderr_data, "/");
  EXPECT_EQ(reply->outcome, CacheOutcome::kHit);
  EXPECT_TRUE(client->stop(deadline_in(milliseconds(5000))));
  EXPECT_EQ(service.requests(), 4);
}

// Issue 16: with Handshake::kWithFirstRequest, hello and the first request
// go out in one write, and hello-ok is checked before the request's reply.
TEST(Client, HelloTravelsWithTheFirstRequest) {
  FakeService service(HelloOk{kProtocolVersion, 5, 777}, answer_normally, true);
  auto client = Client::connect(service.path(), deadline_in(milliseconds(5000)), 0,
                                Handshake::kWithFirstRequest);
  ASSERT_TRUE(client) << client.error().message;
  ExecRequest request;
  request.program = "/bin/true";
  request.argv = {"true", "a"};
  request.cwd = "/";
  auto reply = client->exec(request, deadline_in(milliseconds(5000)), 0);
  ASSERT_TRUE(reply) << reply.error().message;
  EXPECT_EQ(reply->exit_code, 2);
  EXPECT_EQ(client->hello().service_pid, 777);
  EXPECT_TRUE(client->ping(deadline_in(milliseconds(5000))));
  EXPECT_EQ(service.requests(), 2);
}

TEST(Client, DeferredHandshakeErrorsComeWithTheFirstRequest) {
  {
    FakeService service(
        ErrorFrame{static_cast<uint16_t>(ErrorCode::kPermission), "uid 1000 is not 0"},
        answer_normally);
    auto client = Client::connect(service.path(), deadline_in(milliseconds(5000)), 0,
                                  Handshake::kWithFirstRequest);
    ASSERT_TRUE(client) << client.error().message;
    auto pong = client->ping(deadline_in(milliseconds(5000)));
    ASSERT_FALSE(pong);
    EXPECT_EQ(pong.error().code, ErrorCode::kPermission);
    EXPECT_EQ(pong.error().message, "uid 1000 is not 0");
  }
  FakeService service(HelloOk{kProtocolVersion + 1, 0, 1}, answer_normally);
  auto client = Client::connect(service.path(), deadline_in(milliseconds(5000)), 0,
                                Handshake::kWithFirstRequest);
  ASSERT_TRUE(client) << client.error().message;
  auto pong = client->ping(deadline_in(milliseconds(5000)));
  ASSERT_FALSE(pong);
  EXPECT_EQ(pong.error().code, ErrorCode::kUnsupported);
}

TEST(Client, RefusedHandshakeMapsErrorCode) {
  FakeService service(
      ErrorFrame{static_cast<uint16_t>(ErrorCode::kPermission), "uid 1000 is not 0"},
      answer_normally);
  auto client = Client::connect(service.path(), deadline_in(milliseconds(5000)));
  ASSERT_FALSE(client);
  EXPECT_EQ(client.error().code, ErrorCode::kPermission);
  EXPECT_EQ(client.error().message, "uid 1000 is not 0");
}

TEST(Client, ServiceVersionMismatchIsUnsupported) {
  FakeService service(HelloOk{kProtocolVersion + 1, 0, 1}, answer_normally);
  auto client = Client::connect(service.path(), deadline_in(milliseconds(5000)));
  ASSERT_FALSE(client);
  EXPECT_EQ(client.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(client.error().message.find("version 2"), std::string::npos) << client.error().message;
}

TEST(Client, ErrorFrameReplyMapsToItsCode) {
  FakeService service(HelloOk{}, [](const Message&) -> std::optional<Message> {
    return ErrorFrame{static_cast<uint16_t>(ErrorCode::kStopping), "service stopping"};
  });
  auto client = Client::connect(service.path(), deadline_in(milliseconds(5000)));
  ASSERT_TRUE(client);
  auto r = client->ping(deadline_in(milliseconds(5000)));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kStopping);
}

TEST(Client, WrongReplyTypeIsProtocolError) {
  FakeService service(HelloOk{}, [](const Message&) -> std::optional<Message> { return Pong{}; });
  auto client = Client::connect(service.path(), deadline_in(milliseconds(5000)));
  ASSERT_TRUE(client);
  auto r = client->status_json(deadline_in(milliseconds(5000)));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kProtocol);
}

TEST(Client, SilentServiceTimesOut) {
  FakeService service(HelloOk{},
                      [](const Message&) -> std::optional<Message> { return std::nullopt; });
  auto client = Client::connect(service.path(), deadline_in(milliseconds(5000)));
  ASSERT_TRUE(client);
  auto r = client->ping(deadline_in(milliseconds(50)));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kTimeout);
}

// The checks of docs/threat-model.md: nothing is sent to a socket whose
// directory or listener is not ours.
TEST(Client, RefusesASocketDirectoryOthersCanWrite) {
  std::string dir = ccpool::testing::scratch_dir() + "/loose";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  auto client = Client::connect(dir + "/sock", deadline_in(milliseconds(500)));
  ASSERT_FALSE(client);
  EXPECT_EQ(client.error().code, ErrorCode::kPermission);
  EXPECT_NE(client.error().message.find("'" + dir + "'"), std::string::npos)
      << client.error().message;
  EXPECT_NE(client.error().message.find("chmod 700"), std::string::npos) << client.error().message;
}

TEST(Client, RefusesAListenerOfAnotherUid) {
  if (::geteuid() != 0) {
    std::fprintf(stderr, "SKIP: needs root to listen as a second uid\n");
    std::_Exit(125);
  }
  std::string path = ccpool::testing::scratch_dir() + "/s";
  auto addr = unix_address(path);
  ASSERT_TRUE(addr);
  UniqueFd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_EQ(::bind(listener.get(), reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr), 0);
  int report[2];
  ASSERT_EQ(::pipe(report), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // the impostor: listen()s as uid 65534, reports the bytes it got
    if (::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0) ::_exit(1);
    if (::listen(listener.get(), 4) != 0) ::_exit(2);
    (void)!::write(report[1], "L", 1);
    int conn = ::accept(listener.get(), nullptr, nullptr);
    char buf[256];
    ssize_t total = 0, n;
    while (conn >= 0 && (n = ::read(conn, buf, sizeof buf)) > 0) total += n;
    char byte = total == 0 ? '0' : '+';
    (void)!::write(report[1], &byte, 1);
    ::_exit(0);
  }
  ::close(report[1]);
  char ready = 0;
  ASSERT_EQ(::read(report[0], &ready, 1), 1);
  auto client = Client::connect(path, deadline_in(milliseconds(2000)));
  ASSERT_FALSE(client);
  EXPECT_EQ(client.error().code, ErrorCode::kPermission);
  EXPECT_NE(client.error().message.find("'" + path + "'"), std::string::npos)
      << client.error().message;
  EXPECT_NE(client.error().message.find("uid 65534"), std::string::npos) << client.error().message;
  char sent = 0;
  ASSERT_EQ(::read(report[0], &sent, 1), 1);
  EXPECT_EQ(sent, '0') << "the client sent bytes to the impostor";
  ::close(report[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(Client, NoServiceIsUnreachable) {
  auto client =
      Client::connect(ccpool::testing::scratch_dir() + "/none", deadline_in(milliseconds(500)));
  ASSERT_FALSE(client);
  EXPECT_EQ(client.error().code, ErrorCode::kUnreachable);
}

}  // namespace
}  // namespace ccpool::ipc
