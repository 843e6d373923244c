// What a Redis writer can make a node read (issue 12): a value larger than
// max_value is refused without being transferred whole, on get() and on a
// lease waiter's poll.
#include <gtest/gtest.h>

#include "tests/remote/fixture.h"
#include "tests/support/peak_rss.h"

namespace ccpool::remote {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

TEST_F(RemoteTest, AnOversizedValueIsRefusedWithoutReadingIt) {
  RemoteOptions o = options();
  o.max_value = kMiB;
  auto tier = make_tier(o);
  Digest key = hash_bytes("huge");
  {
    std::string huge(64 * kMiB, 'h');
    raw({"SET", tier->value_key(key), huge});
  }
  ASSERT_TRUE(tier->get(hash_bytes("warm up the connection pool")) == std::nullopt);
  std::optional<std::string> got;
  uint64_t growth = ccpool::testing::peak_rss_growth([&] { got = tier->get(key); });
  ASSERT_NE(growth, UINT64_MAX) << "cannot reset the peak RSS (/proc/self/clear_refs)";
  EXPECT_FALSE(got);
  EXPECT_EQ(tier->counters().invalid, 1u);
  EXPECT_LT(growth, 16 * kMiB);
}

TEST_F(RemoteTest, ALeaseWaiterDoesNotReadAnOversizedValue) {
  RemoteOptions o = options();
  o.max_value = kMiB;
  auto tier = make_tier(o);
  Digest key = hash_bytes("huge-leased");
  raw({"SET", tier->lease_key(key), "another-node", "PX", "60000"});
  {
    std::string huge(64 * kMiB, 'h');
    raw({"SET", tier->value_key(key), huge});
  }
  std::optional<std::string> got;
  uint64_t growth = ccpool::testing::peak_rss_growth(
      [&] { got = tier->wait_for_result(key, std::chrono::milliseconds(2000)); });
  EXPECT_FALSE(got);
  EXPECT_EQ(tier->counters().invalid, 1u);
  EXPECT_LT(growth, 16 * kMiB);
}

// A missing key and an empty value are both plain misses.
TEST_F(RemoteTest, MissingAndEmptyValuesAreMisses) {
  auto tier = make_tier(options());
  Digest empty = hash_bytes("empty");
  raw({"SET", tier->value_key(empty), ""});
  EXPECT_FALSE(tier->get(empty));
  EXPECT_FALSE(tier->get(hash_bytes("absent")));
  EXPECT_EQ(tier->counters().misses, 2u);
  EXPECT_EQ(tier->counters().invalid, 0u);
}

}  // namespace
}  // namespace ccpool::remote
