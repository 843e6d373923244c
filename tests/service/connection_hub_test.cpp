// ConnectionHub::send from other threads: a reply is written by the sending
// thread when nothing is queued before it, and through the I/O thread when
// the socket is full; either way frames arrive whole and in send() order.
#include "service/connection_hub.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "ipc/socket.h"
#include "tests/support/scratch.h"

namespace ccpool::service {
namespace {

class HubTest : public ::testing::Test {
 protected:
  void SetUp() override {
    m_path = ccpool::testing::scratch_dir() + "/sock";
    ConnectionHub::Callbacks callbacks;
    callbacks.on_message = [this](uint64_t conn_id, const ipc::PeerCred&, ipc::Message, UniqueFd) {
      m_conn.set_value(conn_id);
    };
    callbacks.on_disconnect = [this](uint64_t) { ++m_disconnects; };
    auto hub = ConnectionHub::create(m_path, callbacks);
    ASSERT_TRUE(hub.has_value()) << hub.error().message;
    m_hub = std::move(*hub);
    m_thread = std::thread([this] { m_hub->run([this] { return m_stop.load(); }, [] {}); });
  }
  void TearDown() override {
    m_stop = true;
    m_hub->wake();
    m_thread.join();
  }
  // Connects, greets and sends one Ping; returns the connection's id.
  uint64_t connect(UniqueFd& fd, ipc::FrameReader& reader) {
    auto deadline = ipc::deadline_in(std::chrono::seconds(10));
    auto conn = ipc::connect_unix(m_path, deadline);
    EXPECT_TRUE(conn.has_value());
    fd = std::move(*conn);
    EXPECT_TRUE(
        ipc::send_frames(fd.get(), ipc::encode(ipc::Hello{}) + ipc::encode(ipc::Ping{}), deadline));
    auto hello_ok = ipc::recv_message(fd.get(), reader, deadline);
    EXPECT_TRUE(hello_ok && std::holds_alternative<ipc::HelloOk>(*hello_ok));
    return m_conn.get_future().get();
  }

  std::string m_path;
  std::unique_ptr<ConnectionHub> m_hub;
  std::promise<uint64_t> m_conn;
  std::atomic<int> m_disconnects{0};
  std::atomic<bool> m_stop{false};
  std::thread m_thread;
};

TEST_F(HubTest, OtherThreadsRepliesKeepOrder) {
  UniqueFd fd;
  ipc::FrameReader reader;
  uint64_t id = connect(fd, reader);
  // 400 x 40 KiB is far more than a Unix socket buffers: while the client
  // does not read, the sender fills the socket itself, then queues the rest
  // at the I/O thread, and must not write past what is queued.
  constexpr int kFrames = 400;
  std::thread sender([&] {
    for (int i = 0; i < kFrames; ++i) {
      m_hub->send(id,
                  ipc::StatusReply{std::to_string(i) + ":" + std::string(40 * 1024, 'a' + i % 26)});
      if (i == kFrames / 2) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  for (int i = 0; i < kFrames; ++i) {
    auto m = ipc::recv_message(fd.get(), reader, ipc::deadline_in(std::chrono::seconds(20)));
    ASSERT_TRUE(m.has_value()) << i << ": " << m.error().message;
    auto* reply = std::get_if<ipc::StatusReply>(&*m);
    ASSERT_NE(reply, nullptr) << i;
    ASSERT_EQ(reply->json, std::to_string(i) + ":" + std::string(40 * 1024, 'a' + i % 26)) << i;
  }
  sender.join();
}

TEST_F(HubTest, SendAfterPeerLeft) {
  UniqueFd fd;
  ipc::FrameReader reader;
  uint64_t id = connect(fd, reader);
  fd.reset();
  for (int i = 0; i < 100 && m_disconnects.load() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(m_disconnects.load(), 1);
  m_hub->send(id, ipc::Pong{});  // the connection is gone: nothing to write to, no crash
  m_hub->send(id, ipc::Pong{}, true);
  EXPECT_EQ(m_hub->connection_count(), 0u);
}

// What on_message answers on the I/O thread, and hello-ok before it, leave in
// one write when the client sent hello and its request in one: the client
// wakes once. A request in a later read is answered in a write of its own.
TEST(HubWrites, HelloOkAndAnInlineReplyShareOneWrite) {
  std::string path = ccpool::testing::scratch_dir() + "/sock";
  ConnectionHub* hub_ptr = nullptr;
  std::atomic<bool> quiet_seen{false};
  ConnectionHub::Callbacks callbacks;
  callbacks.on_message = [&](uint64_t conn_id, const ipc::PeerCred&, ipc::Message, UniqueFd) {
    quiet_seen = hub_ptr->quiet();  // the only event of its wait
    hub_ptr->send(conn_id, ipc::Pong{});
  };
  callbacks.on_disconnect = [](uint64_t) {};
  auto hub = ConnectionHub::create(path, callbacks);
  ASSERT_TRUE(hub.has_value()) << hub.error().message;
  hub_ptr = hub->get();
  std::atomic<bool> stop{false};
  std::thread loop([&] { hub_ptr->run([&] { return stop.load(); }, [] {}); });

  auto deadline = ipc::deadline_in(std::chrono::seconds(10));
  auto conn = ipc::connect_unix(path, deadline);
  ASSERT_TRUE(conn.has_value());
  ASSERT_TRUE(ipc::send_frames(conn->get(), ipc::encode(ipc::Hello{}) + ipc::encode(ipc::Ping{}),
                               deadline));
  ipc::FrameReader reader;
  auto hello_ok = ipc::recv_message(conn->get(), reader, deadline);
  ASSERT_TRUE(hello_ok && std::holds_alternative<ipc::HelloOk>(*hello_ok));
  auto pong = ipc::recv_message(conn->get(), reader, deadline);
  ASSERT_TRUE(pong && std::holds_alternative<ipc::Pong>(*pong));
  EXPECT_TRUE(quiet_seen.load());

  ASSERT_TRUE(ipc::send_frames(conn->get(), ipc::encode(ipc::Ping{}), deadline));
  pong = ipc::recv_message(conn->get(), reader, deadline);
  ASSERT_TRUE(pong && std::holds_alternative<ipc::Pong>(*pong));

  stop = true;
  hub_ptr->wake();
  loop.join();  // every count the loop made is visible from here
  EXPECT_EQ(hub_ptr->counters().writes.load(), 2u);  // hello-ok + pong, then the second pong
}

}  // namespace
}  // namespace ccpool::service
