// Cross-node single-flight: exactly one node takes a lease, the others wait
// for its value; a dead holder's lease expires; release never frees a lease
// another node took over.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <latch>
#include <thread>

#include "tests/remote/fixture.h"

namespace ccpool::remote {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

TEST_F(RemoteTest, RacingNodesGetExactlyOneLeaseAndWaitersGetTheValue) {
  auto a = make_tier(options());
  auto b = make_tier(options());
  constexpr int kKeys = 10;
  for (int i = 0; i < kKeys; ++i) {
    Digest k = hash_bytes("race-" + std::to_string(i));
    std::latch start(2);
    auto race = [&](Tier* t) {
      start.arrive_and_wait();
      return t->acquire_lease(k);
    };
    auto fa = std::async(std::launch::async, race, a.get());
    auto fb = std::async(std::launch::async, race, b.get());
    LeaseState sa = fa.get(), sb = fb.get();
    ASSERT_EQ((sa == LeaseState::kAcquired) + (sb == LeaseState::kAcquired), 1) << i;
    ASSERT_EQ((sa == LeaseState::kHeldByOther) + (sb == LeaseState::kHeldByOther), 1) << i;
    Tier* holder = sa == LeaseState::kAcquired ? a.get() : b.get();
    Tier* waiter = holder == a.get() ? b.get() : a.get();

    std::string value = pattern(4096, static_cast<char>(i));
    auto waited = std::async(std::launch::async,
                             [&] { return waiter->wait_for_result(k, std::chrono::seconds(30)); });
    holder->put_async(k, value);
    holder->release_lease(k);  // queued behind the put: the waiter sees the value first
    auto got = waited.get();
    ASSERT_TRUE(got) << i;
    EXPECT_EQ(*got, value);
    holder->flush_for_testing();
    EXPECT_EQ(raw({"EXISTS", holder->lease_key(k)}).integer, 0) << i;
  }
  RemoteCounters ca = a->counters(), cb = b->counters();
  EXPECT_EQ(ca.lease_acquired + cb.lease_acquired, static_cast<uint64_t>(kKeys));
  EXPECT_EQ(ca.lease_waits + cb.lease_waits, static_cast<uint64_t>(kKeys));
  EXPECT_EQ(ca.hits + cb.hits, static_cast<uint64_t>(kKeys));
  EXPECT_EQ(ca.lease_expired + cb.lease_expired, 0u);
}

TEST_F(RemoteTest, SameNodeSecondAcquireIsHeldByOther) {
  auto a = make_tier(options());
  Digest k = hash_bytes("local");
  EXPECT_EQ(a->acquire_lease(k), LeaseState::kAcquired);
  EXPECT_EQ(a->acquire_lease(k), LeaseState::kHeldByOther);
  a->release_lease(k);
  a->flush_for_testing();
  EXPECT_EQ(a->acquire_lease(k), LeaseState::kAcquired);
}

// Any writer of the shared Redis can plant a lease; one without a TTL would
// never expire, so it is not waited on at all.
TEST_F(RemoteTest, LeaseWithoutTtlIsNotWaitedOn) {
  auto a = make_tier(options());
  Digest k = hash_bytes("planted");
  raw({"SET", a->lease_key(k), "someone-else"});
  EXPECT_EQ(a->acquire_lease(k), LeaseState::kUnavailable);
  EXPECT_EQ(a->counters().lease_untimed, 1u);
  raw({"PEXPIRE", a->lease_key(k), "60000"});  // a timed lease is a real holder's
  EXPECT_EQ(a->acquire_lease(k), LeaseState::kHeldByOther);
  EXPECT_EQ(a->counters().lease_untimed, 1u);
}

TEST_F(RemoteTest, DeadHolderLeaseExpiresAndWaiterGivesUp) {
  RemoteOptions o = options();
  o.lease_ttl = milliseconds(600);
  auto holder = make_tier(o);
  auto waiter = make_tier(o);
  Digest k = hash_bytes("dies");
  ASSERT_EQ(holder->acquire_lease(k), LeaseState::kAcquired);
  // Renewal keeps a live holder's lease well past one lease_ttl.
  std::this_thread::sleep_for(milliseconds(1500));
  EXPECT_GT(raw({"PTTL", holder->lease_key(k)}).integer, 0) << "lease not renewed";
  EXPECT_EQ(waiter->acquire_lease(k), LeaseState::kHeldByOther);

  holder.reset();  // the holder "dies": no release, no more renewals
  auto begin = Clock::now();
  auto got = waiter->wait_for_result(k, std::chrono::seconds(30));
  EXPECT_FALSE(got);
  EXPECT_LT(Clock::now() - begin, kHangGuard);
  RemoteCounters c = waiter->counters();
  EXPECT_EQ(c.lease_waits, 1u);
  EXPECT_EQ(c.lease_expired, 1u);
  EXPECT_EQ(raw({"EXISTS", waiter->lease_key(k)}).integer, 0);
  EXPECT_EQ(waiter->acquire_lease(k), LeaseState::kAcquired);  // now it compiles locally
}

TEST_F(RemoteTest, WaitEndsAtMaxWaitWhileLeaseIsHeld) {
  auto holder = make_tier(options());
  auto waiter = make_tier(options());
  Digest k = hash_bytes("slow");
  ASSERT_EQ(holder->acquire_lease(k), LeaseState::kAcquired);
  EXPECT_FALSE(waiter->wait_for_result(k, milliseconds(200)));
  EXPECT_EQ(waiter->counters().lease_expired, 0u);  // gave up, the lease is still there
  EXPECT_EQ(raw({"EXISTS", holder->lease_key(k)}).integer, 1);
}

TEST_F(RemoteTest, ReleaseIsCompareAndDelete) {
  auto a = make_tier(options());
  Digest k = hash_bytes("taken-over");
  ASSERT_EQ(a->acquire_lease(k), LeaseState::kAcquired);
  // As if a's lease expired and another node took it.
  raw({"SET", a->lease_key(k), "other-node:1:feed", "PX", "30000"});
  a->release_lease(k);
  a->flush_for_testing();
  Reply owner = raw({"GET", a->lease_key(k)});
  EXPECT_EQ(owner.str, "other-node:1:feed");

  Digest mine = hash_bytes("mine");
  ASSERT_EQ(a->acquire_lease(mine), LeaseState::kAcquired);
  EXPECT_EQ(raw({"GET", a->lease_key(mine)}).str, a->node_token());
  a->release_lease(mine);
  a->flush_for_testing();
  EXPECT_EQ(raw({"EXISTS", a->lease_key(mine)}).integer, 0);
}

TEST_F(RemoteTest, RenewalNoticesALeaseTakenOver) {
  RemoteOptions o = options();
  o.lease_ttl = milliseconds(300);
  auto a = make_tier(o);
  Digest k = hash_bytes("lost");
  ASSERT_EQ(a->acquire_lease(k), LeaseState::kAcquired);
  raw({"SET", a->lease_key(k), "other-node:1:feed", "PX", "30000"});
  auto deadline = Clock::now() + kHangGuard;
  while (a->counters().lease_lost == 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_EQ(a->counters().lease_lost, 1u);
  EXPECT_GT(raw({"PTTL", a->lease_key(k)}).integer, 1000) << "renewal touched a foreign lease";
}

}  // namespace
}  // namespace ccpool::remote
