// Deferred SET replies: a SET's reply waits for the backend's completion, the
// replies of a connection keep command order, and a command behind a waiting
// SET runs only after it (so it reads that SET's value).
#include <gtest/gtest.h>
#include <poll.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "resp/front.h"
#include "tests/resp/socket_client.h"
#include "tests/support/scratch.h"

namespace ccpool::resp {
namespace {

using namespace ccpool::resp::testing;

// An InMemoryKv whose SETs complete only when the test (or a committer
// thread) says so, like a store that commits in batches.
class HeldKv : public InMemoryKv {
 public:
  void set_async(std::string_view key, std::string_view value, int64_t expires_at_ms,
                 SetDone done) override {
    std::lock_guard lock(m_mutex);
    m_pending.push_back({std::string(key), std::string(value), expires_at_ms, std::move(done)});
    m_cv.notify_all();
  }
  void end_of_burst() override {
    std::lock_guard lock(m_mutex);
    m_bursts.push_back(m_pending.size());
    m_cv.notify_all();
  }
  // Pending SETs at each end_of_burst call so far.
  std::vector<size_t> wait_for_bursts(size_t n) {
    std::unique_lock lock(m_mutex);
    m_cv.wait_for(lock, std::chrono::seconds(30), [&] { return m_bursts.size() >= n; });
    return m_bursts;
  }
  // Completes every SET received so far: stored (written, then answered) or refused.
  size_t complete_all(bool stored) {
    std::deque<Pending> batch;
    {
      std::lock_guard lock(m_mutex);
      batch.swap(m_pending);
    }
    for (Pending& p : batch) {
      if (stored) set(p.key, p.value, p.expires_at_ms);
      p.done(stored);
    }
    return batch.size();
  }
  void wait_for(size_t n) {
    std::unique_lock lock(m_mutex);
    m_cv.wait(lock, [&] { return m_pending.size() >= n; });
  }
  size_t pending() {
    std::lock_guard lock(m_mutex);
    return m_pending.size();
  }

 private:
  struct Pending {
    std::string key, value;
    int64_t expires_at_ms;
    SetDone done;
  };
  std::mutex m_mutex;
  std::condition_variable m_cv;
  std::deque<Pending> m_pending;
  std::vector<size_t> m_bursts;
};

// True when no byte arrives within `ms` (a negative check: the reply is held).
bool silent_for(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, ms) == 0;
}

class DeferredSetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FrontOptions options;
    options.unix_path = ccpool::testing::scratch_dir() + "/resp.sock";
    auto front = Front::start(options, m_kv);
    ASSERT_TRUE(front.has_value()) << front.error().message;
    m_front = std::move(*front);
  }
  HeldKv m_kv;
  std::unique_ptr<Front> m_front;
};

TEST_F(DeferredSetTest, ReplyWaitsForTheWriteAndALaterGetSeesIt) {
  UniqueFd fd = connect_unix(m_front->unix_path());
  ASSERT_TRUE(fd);
  ASSERT_TRUE(
      send_all(fd.get(), command({"SET", "k", "v1"}) + command({"GET", "k"}) + command({"PING"})));
  m_kv.wait_for(1);
  EXPECT_TRUE(silent_for(fd.get(), 200));  // neither the SET's reply nor the GET behind it
  EXPECT_EQ(m_kv.pending(), 1u);
  EXPECT_EQ(m_kv.complete_all(true), 1u);
  std::string expected = "+OK\r\n" + bulk("v1") + "+PONG\r\n";
  EXPECT_EQ(read_exact(fd.get(), expected.size()), expected);
}

// A loop that handed SETs to the backend says when its pass is over, so a
// batching backend commits them without waiting for company.
TEST_F(DeferredSetTest, ThePassThatQueuedSetsEndsWithEndOfBurst) {
  UniqueFd fd = connect_unix(m_front->unix_path());
  ASSERT_TRUE(fd);
  ASSERT_TRUE(send_all(fd.get(), command({"SET", "a", "1"}) + command({"SET", "b", "2"})));
  std::vector<size_t> bursts = m_kv.wait_for_bursts(1);
  ASSERT_EQ(bursts.size(), 1u);
  EXPECT_EQ(bursts.front(), 2u);  // after both SETs of the read, not after each
  EXPECT_EQ(m_kv.complete_all(true), 2u);
  EXPECT_EQ(read_exact(fd.get(), 10), "+OK\r\n+OK\r\n");
  EXPECT_EQ(round_trip(fd.get(), command({"GET", "a"}), 7), bulk("1"));
  EXPECT_EQ(m_kv.wait_for_bursts(1).size(), 1u);  // a pass without SETs does not call it
}

TEST_F(DeferredSetTest, RefusedWritesAnswerErrorsInOrderAndNeverOk) {
  UniqueFd fd = connect_unix(m_front->unix_path());
  ASSERT_TRUE(fd);
  // SETs pipeline behind each other; the bad one is answered at once, but in its place.
  std::string request =
      command({"SET", "a", "1"}) + command({"SET", "b", "2", "BOGUS"}) + command({"SET", "c", "3"});
  ASSERT_TRUE(send_all(fd.get(), request));
  m_kv.wait_for(2);
  EXPECT_TRUE(silent_for(fd.get(), 100));
  EXPECT_EQ(m_kv.complete_all(false), 2u);
  std::string refused =
      "-ERR the ccpool store refused the value (store full or unavailable; see the service "
      "log)\r\n";
  std::string expected = refused + "-ERR syntax error\r\n" + refused;
  EXPECT_EQ(read_exact(fd.get(), expected.size()), expected);
  EXPECT_EQ(round_trip(fd.get(), command({"EXISTS", "a", "c"}), 4), ":0\r\n");
}

TEST_F(DeferredSetTest, PipelinedSetsFromManyClients) {
  std::atomic<bool> stop{false};
  std::thread committer([&] {  // completes whatever arrived, like a group committer
    while (!stop) {
      m_kv.complete_all(true);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  constexpr int kClients = 8, kSets = 200;
  std::vector<int> good(kClients, 0);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      UniqueFd fd = connect_unix(m_front->unix_path());
      std::string request, expected;
      for (int i = 0; i < kSets; ++i) {
        std::string key = "c" + std::to_string(c) + ":" + std::to_string(i);
        request += command({"SET", key, key + "=" + std::string(i % 50, 'x')});
        expected += "+OK\r\n";
      }
      std::string last = "c" + std::to_string(c) + ":" + std::to_string(kSets - 1);
      request += command({"GET", last});
      expected += bulk(last + "=" + std::string((kSets - 1) % 50, 'x'));
      if (fd && round_trip(fd.get(), request, expected.size()) == expected) good[c] = 1;
    });
  }
  for (auto& t : clients) t.join();
  stop = true;
  committer.join();
  for (int c = 0; c < kClients; ++c) EXPECT_EQ(good[c], 1) << "client " << c;
  EXPECT_EQ(m_kv.size(), static_cast<size_t>(kClients * kSets));
}

TEST_F(DeferredSetTest, HangUpWithSetsInFlight) {
  {
    UniqueFd fd = connect_unix(m_front->unix_path());
    ASSERT_TRUE(send_all(fd.get(), command({"SET", "gone", "1"}) + command({"SET", "gone2", "2"})));
    m_kv.wait_for(2);
  }  // closed before the completions
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(m_kv.complete_all(true), 2u);
  UniqueFd fd = connect_unix(m_front->unix_path());
  EXPECT_EQ(round_trip(fd.get(), command({"EXISTS", "gone", "gone2"}), 4), ":2\r\n");
}

// A waiter on key "g", whose leader sent its SET of "graph" and hung up before
// the store completed it. Returns the waiter's connection.
UniqueFd wait_on_a_leader_that_set_and_hung_up(const Front& front, HeldKv& kv) {
  UniqueFd waiter = connect_unix(front.unix_path());
  UniqueFd leader = connect_unix(front.unix_path());
  EXPECT_EQ(round_trip(leader.get(), command({"CCPOOL.LEASE", "g", "0"}), 7), "+LEAD\r\n");
  EXPECT_TRUE(send_all(waiter.get(), command({"CCPOOL.LEASE", "g", "60000"})));
  EXPECT_TRUE(silent_for(waiter.get(), 100));
  EXPECT_TRUE(send_all(leader.get(), command({"SET", "g", "graph"})));
  kv.wait_for(1);
  return waiter;  // `leader` closes here, before the store has the value
}

// Its lease ends with that value, and whoever waited gets it, not a miss.
TEST_F(DeferredSetTest, AGoneLeadersSetServesItsWaiters) {
  UniqueFd waiter = wait_on_a_leader_that_set_and_hung_up(*m_front, m_kv);
  EXPECT_TRUE(silent_for(waiter.get(), 200)) << "the waiter was sent away before the SET landed";
  EXPECT_EQ(m_kv.complete_all(true), 1u);
  EXPECT_EQ(read_exact(waiter.get(), bulk("graph").size()), bulk("graph"));
  LeaseStats stats = m_front->lease_stats();
  EXPECT_EQ(stats.served, 1u);
  EXPECT_EQ(stats.abandoned, 0u);
  EXPECT_EQ(stats.keys_in_flight, 0u);
}

// The same SET refused by the store: the lease ends with the connection, and
// the waiter computes the value itself.
TEST_F(DeferredSetTest, AGoneLeadersRefusedSetReleasesItsWaiters) {
  UniqueFd waiter = wait_on_a_leader_that_set_and_hung_up(*m_front, m_kv);
  EXPECT_TRUE(silent_for(waiter.get(), 100));
  EXPECT_EQ(m_kv.complete_all(false), 1u);
  EXPECT_EQ(read_exact(waiter.get(), 7), "+MISS\r\n");
  EXPECT_EQ(m_front->lease_stats().keys_in_flight, 0u);
}

}  // namespace
}  // namespace ccpool::resp
