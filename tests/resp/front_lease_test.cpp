// CCPOOL.LEASE / CCPOOL.RELEASE: single-flight for values the clients compute
// (resp/lease_table.h). Real sockets against a real Front over InMemoryKv;
// every wait is released by an event the test causes, except the bound, which
// is what the bound test measures.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include "resp/front.h"
#include "tests/resp/socket_client.h"
#include "tests/support/scratch.h"

namespace ccpool::resp {
namespace {

using namespace ccpool::resp::testing;

bool silent_for(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, ms) == 0;
}

class LeaseTest : public ::testing::Test {
 protected:
  void start(std::chrono::milliseconds max_wait = kDefaultMaxLeaseWait) {
    FrontOptions options;
    options.unix_path = ccpool::testing::scratch_dir() + "/resp.sock";
    options.max_lease_wait = max_wait;
    auto front = Front::start(options, m_kv);
    ASSERT_TRUE(front.has_value()) << front.error().message;
    m_front = std::move(*front);
  }
  UniqueFd client() {
    UniqueFd fd = connect_unix(m_front->unix_path());
    EXPECT_TRUE(fd);
    return fd;
  }
  void lease(int fd, std::string_view key, std::string_view wait_ms = "60000") {
    EXPECT_TRUE(send_all(fd, command({"CCPOOL.LEASE", key, wait_ms})));
  }
  InMemoryKv m_kv;
  std::unique_ptr<Front> m_front;
};

TEST_F(LeaseTest, FirstMissLeadsAndAnotherClientWaitsForItsSet) {
  start();
  UniqueFd leader = client(), waiter = client();
  lease(leader.get(), "k");
  EXPECT_EQ(read_exact(leader.get(), 7), "+LEAD\r\n");
  lease(waiter.get(), "k");
  EXPECT_TRUE(silent_for(waiter.get(), 200));
  EXPECT_EQ(m_front->lease_stats().waiting, 1u);
  EXPECT_EQ(m_front->lease_stats().keys_in_flight, 1u);
  EXPECT_EQ(round_trip(leader.get(), command({"SET", "k", "graph"}), 5), "+OK\r\n");
  EXPECT_EQ(read_exact(waiter.get(), bulk("graph").size()), bulk("graph"));
  LeaseStats stats = m_front->lease_stats();
  EXPECT_EQ(stats.leads, 1u);
  EXPECT_EQ(stats.waits, 1u);
  EXPECT_EQ(stats.served, 1u);
  EXPECT_EQ(stats.keys_in_flight, 0u);
  EXPECT_EQ(stats.waiting, 0u);
}

TEST_F(LeaseTest, AKeyWithAValueIsServedWithoutALease) {
  start();
  UniqueFd fd = client();
  EXPECT_EQ(round_trip(fd.get(), command({"SET", "k", "v"}), 5), "+OK\r\n");
  EXPECT_EQ(round_trip(fd.get(), command({"CCPOOL.LEASE", "k", "1000"}), bulk("v").size()),
            bulk("v"));
  EXPECT_EQ(m_front->lease_stats().leads, 0u);
}

TEST_F(LeaseTest, ReleaseWithoutAValueSendsTheWaitersToCompileThemselves) {
  start();
  UniqueFd leader = client(), w1 = client(), w2 = client();
  lease(leader.get(), "k");
  EXPECT_EQ(read_exact(leader.get(), 7), "+LEAD\r\n");
  lease(w1.get(), "k");
  lease(w2.get(), "k");
  EXPECT_TRUE(silent_for(w1.get(), 100));
  EXPECT_EQ(round_trip(leader.get(), command({"CCPOOL.RELEASE", "k"}), 4), ":1\r\n");
  EXPECT_EQ(read_exact(w1.get(), 7), "+MISS\r\n");
  EXPECT_EQ(read_exact(w2.get(), 7), "+MISS\r\n");
  EXPECT_EQ(m_front->lease_stats().abandoned, 2u);
  // The lease is gone: the next miss leads; releasing what one does not hold says 0.
  EXPECT_EQ(round_trip(w1.get(), command({"CCPOOL.LEASE", "k", "0"}), 7), "+LEAD\r\n");
  EXPECT_EQ(round_trip(w2.get(), command({"CCPOOL.RELEASE", "k"}), 4), ":0\r\n");
}

TEST_F(LeaseTest, ALeaderThatDisconnectsReleasesItsWaitersAtOnce) {
  start();
  UniqueFd leader = client(), waiter = client();
  lease(leader.get(), "a");
  lease(leader.get(), "b");
  EXPECT_EQ(read_exact(leader.get(), 14), "+LEAD\r\n+LEAD\r\n");
  lease(waiter.get(), "b");
  EXPECT_TRUE(silent_for(waiter.get(), 100));
  leader.reset();  // a crashed or interrupted rank
  EXPECT_EQ(read_exact(waiter.get(), 7), "+MISS\r\n");
  EXPECT_EQ(m_front->lease_stats().keys_in_flight, 0u);
}

// A leader that dies while it waits for another key still owes that wait's
// reply: its leases must not wait for that reply (nor for the wait's bound).
TEST_F(LeaseTest, ALeaderKilledWhileItWaitsReleasesAtOnce) {
  start();
  UniqueFd leader = client(), other = client(), waiter = client();
  EXPECT_EQ(round_trip(other.get(), command({"CCPOOL.LEASE", "f", "0"}), 7), "+LEAD\r\n");
  EXPECT_EQ(round_trip(leader.get(), command({"CCPOOL.LEASE", "k", "0"}), 7), "+LEAD\r\n");
  lease(leader.get(), "f");  // the leader now waits for f, up to 60 s
  lease(waiter.get(), "k");
  EXPECT_TRUE(silent_for(waiter.get(), 100));
  EXPECT_EQ(m_front->lease_stats().waiting, 2u);
  leader.reset();  // killed mid-wait
  EXPECT_EQ(read_exact(waiter.get(), 7), "+MISS\r\n");
  LeaseStats stats = m_front->lease_stats();
  EXPECT_EQ(stats.abandoned, 1u);
  EXPECT_EQ(stats.timed_out, 0u);
  EXPECT_EQ(stats.keys_in_flight, 1u);  // f, still led by `other`
  // A client that only half-closes still gets the replies it is owed.
  UniqueFd half = client();
  lease(half.get(), "f");
  EXPECT_TRUE(silent_for(half.get(), 100));
  ASSERT_EQ(::shutdown(half.get(), SHUT_WR), 0);
  EXPECT_EQ(round_trip(other.get(), command({"SET", "f", "graph"}), 5), "+OK\r\n");
  EXPECT_EQ(read_exact(half.get(), bulk("graph").size()), bulk("graph"));
}

TEST_F(LeaseTest, TheLeaderMayAskAgain) {
  start();
  UniqueFd leader = client();
  EXPECT_EQ(round_trip(leader.get(), command({"CCPOOL.LEASE", "k", "0"}), 7), "+LEAD\r\n");
  EXPECT_EQ(round_trip(leader.get(), command({"CCPOOL.LEASE", "k", "0"}), 7), "+LEAD\r\n");
}

TEST_F(LeaseTest, AWaitEndsAtItsBoundAndTheLeaseStaysWithItsLeader) {
  start();
  UniqueFd leader = client(), waiter = client(), late = client();
  EXPECT_EQ(round_trip(leader.get(), command({"CCPOOL.LEASE", "k", "0"}), 7), "+LEAD\r\n");
  lease(waiter.get(), "k", "150");
  EXPECT_EQ(read_exact(waiter.get(), 7), "+MISS\r\n");
  EXPECT_EQ(m_front->lease_stats().timed_out, 1u);
  EXPECT_EQ(round_trip(late.get(), command({"CCPOOL.LEASE", "k", "0"}), 7), "+MISS\r\n");
  EXPECT_EQ(m_front->lease_stats().keys_in_flight, 1u);
}

TEST_F(LeaseTest, TheFrontCapsTheWaitAClientAsksFor) {
  start(std::chrono::milliseconds(150));
  UniqueFd leader = client(), waiter = client();
  EXPECT_EQ(round_trip(leader.get(), command({"CCPOOL.LEASE", "k", "0"}), 7), "+LEAD\r\n");
  lease(waiter.get(), "k", "86400000");
  EXPECT_EQ(read_exact(waiter.get(), 7), "+MISS\r\n");
}

TEST_F(LeaseTest, CommandsBehindAWaitingLeaseAnswerAfterIt) {
  start();
  UniqueFd leader = client(), waiter = client();
  EXPECT_EQ(round_trip(leader.get(), command({"CCPOOL.LEASE", "k", "0"}), 7), "+LEAD\r\n");
  ASSERT_TRUE(send_all(waiter.get(), command({"CCPOOL.LEASE", "k", "60000"}) +
                                         command({"GET", "k"}) + command({"PING"})));
  EXPECT_TRUE(silent_for(waiter.get(), 200));
  EXPECT_EQ(round_trip(leader.get(), command({"SET", "k", "v"}), 5), "+OK\r\n");
  std::string expected = bulk("v") + bulk("v") + "+PONG\r\n";
  EXPECT_EQ(read_exact(waiter.get(), expected.size()), expected);
}

TEST_F(LeaseTest, MsetOfALeasedKeyServesItsWaiters) {
  start();
  UniqueFd leader = client(), waiter = client();
  EXPECT_EQ(round_trip(leader.get(), command({"CCPOOL.LEASE", "k", "0"}), 7), "+LEAD\r\n");
  lease(waiter.get(), "k");
  EXPECT_TRUE(silent_for(waiter.get(), 100));
  EXPECT_EQ(round_trip(leader.get(), command({"MSET", "k", "v2", "other", "x"}), 5), "+OK\r\n");
  EXPECT_EQ(read_exact(waiter.get(), bulk("v2").size()), bulk("v2"));
}

TEST_F(LeaseTest, ABadWaitIsAnError) {
  start();
  UniqueFd fd = client();
  std::string expected = "-ERR value is not an integer or out of range\r\n";
  EXPECT_EQ(round_trip(fd.get(), command({"CCPOOL.LEASE", "k", "-1"}), expected.size()), expected);
  EXPECT_EQ(round_trip(fd.get(), command({"CCPOOL.LEASE", "k", "soon"}), expected.size()),
            expected);
  EXPECT_EQ(m_front->lease_stats().keys_in_flight, 0u);
}

}  // namespace
}  // namespace ccpool::resp
