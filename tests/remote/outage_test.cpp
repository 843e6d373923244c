// Redis slow (SIGSTOP) or down (SIGKILL): every call returns within its
// timeout, errors are counted, the breaker opens after N failures and closes
// after the cooldown once Redis is back.
#include <gtest/gtest.h>

#include <thread>

#include "tests/remote/fixture.h"

namespace ccpool::remote {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

RemoteOptions outage_options(RemoteOptions o) {
  o.connect_timeout = milliseconds(150);
  o.op_timeout = milliseconds(150);
  o.breaker_failures = 3;
  o.breaker_cooldown = milliseconds(400);
  return o;
}

// Calls get until the breaker reports closed (a probe succeeded).
bool wait_for_breaker_to_close(Tier& tier, const Digest& k) {
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline) {
    (void)tier.get(k);
    if (!tier.counters().breaker_open) return true;
    std::this_thread::sleep_for(milliseconds(50));
  }
  return false;
}

template <typename F>
auto bounded(F&& f) {
  auto begin = Clock::now();
  auto result = f();
  EXPECT_LT(Clock::now() - begin, kHangGuard);
  return result;
}

TEST_F(RemoteTest, StoppedServerTimesOutThenBreakerOpensAndCloses) {
  auto tier = make_tier(outage_options(options()));
  Digest k = hash_bytes("slow-server");
  tier->put_async(k, "before");
  tier->flush_for_testing();
  ASSERT_TRUE(tier->get(k));  // a pooled connection exists

  m_server->pause();
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(bounded([&] { return tier->get(k); })) << i;
  EXPECT_EQ(bounded([&] { return tier->acquire_lease(k); }), LeaseState::kUnavailable);
  bounded([&] {
    tier->put_async(k, "during");
    return 0;
  });
  RemoteCounters c = tier->counters();
  EXPECT_EQ(c.errors, 3u);  // the 4th and later calls never reached Redis
  EXPECT_TRUE(c.breaker_open);
  EXPECT_EQ(c.breaker_opened, 1u);
  EXPECT_GE(c.breaker_rejected, 3u);
  EXPECT_EQ(c.hits, 1u);

  m_server->resume();
  ASSERT_TRUE(wait_for_breaker_to_close(*tier, k));
  tier->put_async(k, "after");
  tier->flush_for_testing();
  auto got = tier->get(k);
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, "after");
  EXPECT_EQ(tier->counters().breaker_opened, 1u);
}

TEST_F(RemoteTest, KilledServerFailsSoftAndRecoversAfterRestart) {
  auto tier = make_tier(outage_options(options()));
  Digest k = hash_bytes("down");
  ASSERT_FALSE(tier->get(k));  // healthy miss
  m_server->kill();

  EXPECT_FALSE(bounded([&] { return tier->get(k); }));
  EXPECT_EQ(bounded([&] { return tier->acquire_lease(k); }), LeaseState::kUnavailable);
  bounded([&] {
    tier->put_async(k, "lost");
    tier->flush_for_testing();
    return 0;
  });
  EXPECT_FALSE(bounded([&] { return tier->wait_for_result(k, std::chrono::seconds(30)); }));
  RemoteCounters c = tier->counters();
  EXPECT_EQ(c.errors, 3u);
  EXPECT_EQ(c.writes, 0u);
  EXPECT_TRUE(c.breaker_open);
  EXPECT_EQ(c.breaker_opened, 1u);
  EXPECT_GE(c.breaker_rejected, 1u);

  ASSERT_TRUE(m_server->restart());
  ASSERT_TRUE(wait_for_breaker_to_close(*tier, k));
  tier->put_async(k, "back");
  tier->flush_for_testing();
  auto got = tier->get(k);
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, "back");
}

TEST_F(RemoteTest, ShutdownWithRedisStoppedIsBounded) {
  RemoteOptions o = outage_options(options());
  o.shutdown_drain = milliseconds(300);
  auto tier = make_tier(o);
  m_server->pause();
  for (int i = 0; i < 20; ++i) tier->put_async(hash_bytes(std::to_string(i)), "queued");
  auto begin = Clock::now();
  tier.reset();
  EXPECT_LT(Clock::now() - begin, kHangGuard);
  m_server->resume();
}

}  // namespace
}  // namespace ccpool::remote
