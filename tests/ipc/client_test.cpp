#include "ipc/client.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <thread>

#include "tests/support/scratch.h"

namespace ccpool::ipc {
namespace {

using std::chrono::milliseconds;

// A one-connection fake service: answers Hello with `hello_reply`, then each
// further request with whatever `answer` returns (nullopt: stay silent).
class FakeService {
 public:
  using Answer = std::function<std::optional<Message>(const Message&)>;

  FakeService(Message hello_reply, Answer answer)
      : m_path(ccpool::testing::scratch_dir() + "/s"), m_listener(*listen_unix(m_path)) {
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
    (void)send_message(conn.get(), hello_reply, deadline_in(milliseconds(5000)));
    for (;;) {
      auto m = recv_message(conn.get(), reader, deadline_in(milliseconds(5000)));
      if (!m) return;
      ++m_requests;
      auto reply = answer(*m);
      if (reply) (void)send_message(conn.get(), *reply, deadline_in(milliseconds(5000)));
    }
  }

  std::string m_path;
  UniqueFd m_listener;
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

TEST(Client, RefusedHandshakeMapsErrorCode) {
  FakeService service(ErrorFrame{static_cast<uint16_t>(ErrorCode::kPermission), "uid 1000 is not 0"},
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
  FakeService service(HelloOk{}, [](const Message&) -> std::optional<Message> { return std::nullopt; });
  auto client = Client::connect(service.path(), deadline_in(milliseconds(5000)));
  ASSERT_TRUE(client);
  auto r = client->ping(deadline_in(milliseconds(50)));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kTimeout);
}

TEST(Client, NoServiceIsUnreachable) {
  auto client = Client::connect(ccpool::testing::scratch_dir() + "/none", deadline_in(milliseconds(500)));
  ASSERT_FALSE(client);
  EXPECT_EQ(client.error().code, ErrorCode::kUnreachable);
}

}  // namespace
}  // namespace ccpool::ipc
