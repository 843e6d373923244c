// The data path against a real redis-server: write-back, read-through from
// another node, validation, signing, size limit, TTL, AUTH, unix sockets.
#include <gtest/gtest.h>

#include "base/fs.h"
#include "remote/envelope.h"
#include "tests/remote/fixture.h"

namespace ccpool::remote {
namespace {

[[maybe_unused]] ::testing::Environment* const g_redis_env =
    ::testing::AddGlobalTestEnvironment(new RedisEnvironment);

TEST_F(RemoteTest, PutOnOneNodeGetOnAnother) {
  auto a = make_tier(options());
  auto b = make_tier(options());
  Digest k = hash_bytes("kernel-1");
  std::string value = pattern(16 << 10, 'a');
  a->put_async(k, value);
  a->flush_for_testing();
  EXPECT_EQ(a->counters().writes, 1u);

  auto got = b->get(k);
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, value);
  EXPECT_FALSE(b->get(hash_bytes("never-written")));
  RemoteCounters c = b->counters();
  EXPECT_EQ(c.hits, 1u);
  EXPECT_EQ(c.misses, 1u);
  EXPECT_EQ(c.errors, 0u);
  EXPECT_NE(a->node_token(), b->node_token());
}

TEST_F(RemoteTest, ValidatorRejectsGarbageAndTruncatedValues) {
  RemoteOptions o = options();
  // Stands in for the store's structural + checksum check.
  o.validate = [](std::string_view v) { return v.size() == 100 && v.substr(0, 4) == "GOOD"; };
  auto tier = make_tier(o);
  Digest garbage = hash_bytes("garbage"), rejected = hash_bytes("rejected"),
         truncated = hash_bytes("truncated"), good = hash_bytes("good");
  std::string good_value = "GOOD" + std::string(96, 'x');

  raw({"SET", tier->value_key(garbage), "\x01\x02 not an envelope"});
  std::string bad = seal(rejected, "BAD!" + std::string(96, 'x'), "");
  raw({"SET", tier->value_key(rejected), bad});
  tier->put_async(truncated, good_value);
  tier->put_async(good, good_value);
  tier->flush_for_testing();
  std::string stored = raw({"GET", tier->value_key(truncated)}).str;
  ASSERT_EQ(stored.size(), kEnvelopeHeader + 100);
  raw({"SET", tier->value_key(truncated), stored.substr(0, stored.size() - 10)});

  EXPECT_FALSE(tier->get(garbage));
  EXPECT_FALSE(tier->get(rejected));
  EXPECT_FALSE(tier->get(truncated));
  auto ok_value = tier->get(good);
  ASSERT_TRUE(ok_value);
  EXPECT_EQ(*ok_value, good_value);
  RemoteCounters c = tier->counters();
  EXPECT_EQ(c.invalid, 3u);
  EXPECT_EQ(c.hits, 1u);
  EXPECT_EQ(c.bad_signature, 0u);
}

TEST_F(RemoteTest, SigningIgnoresBadOrMissingSignatures) {
  const std::string& dir = ccpool::testing::scratch_dir();
  const std::string key = "a-shared-secret-of-32-bytes-long";
  ASSERT_TRUE(write_file_atomic(dir + "/hmac.key", key + "\n", 0600));
  RemoteOptions o = options();
  o.hmac_key_file = dir + "/hmac.key";
  auto signer = make_tier(o);
  auto reader = make_tier(o);
  auto lenient = make_tier(options());  // no key: accepts signed values unchecked

  Digest k[6] = {hash_bytes("0"), hash_bytes("1"), hash_bytes("2"),
                 hash_bytes("3"), hash_bytes("4"), hash_bytes("5")};
  raw({"SET", reader->value_key(k[0]), seal(k[0], "unsigned", "")});
  raw({"SET", reader->value_key(k[1]), seal(k[1], "other key", "another-secret-16-bytes-or-more")});
  raw({"SET", reader->value_key(k[2]), "raw garbage"});
  std::string tampered = seal(k[3], "tampered", key);
  tampered.back() ^= 0x20;
  raw({"SET", reader->value_key(k[3]), tampered});
  raw({"SET", reader->value_key(k[4]), seal(k[5], "replayed", key)});  // signed for k5

  signer->put_async(k[5], "genuine");
  signer->flush_for_testing();
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(reader->get(k[i])) << i;
  auto genuine = reader->get(k[5]);
  ASSERT_TRUE(genuine);
  EXPECT_EQ(*genuine, "genuine");
  RemoteCounters c = reader->counters();
  EXPECT_EQ(c.bad_signature, 5u);
  EXPECT_EQ(c.invalid, 0u);
  EXPECT_EQ(c.hits, 1u);
  auto unchecked = lenient->get(k[5]);
  ASSERT_TRUE(unchecked);
  EXPECT_EQ(*unchecked, "genuine");
}

TEST_F(RemoteTest, OversizedValuesAreSkippedAndCounted) {
  RemoteOptions o = options();
  o.max_value = 1024;
  auto tier = make_tier(o);
  Digest big = hash_bytes("big"), fits = hash_bytes("fits");
  tier->put_async(big, std::string(1025, 'b'));
  tier->put_async(fits, std::string(1024, 'f'));
  tier->flush_for_testing();
  RemoteCounters c = tier->counters();
  EXPECT_EQ(c.skipped, 1u);
  EXPECT_EQ(c.writes, 1u);
  EXPECT_EQ(raw({"EXISTS", tier->value_key(big)}).integer, 0);
  EXPECT_EQ(raw({"EXISTS", tier->value_key(fits)}).integer, 1);
}

TEST_F(RemoteTest, WrittenValuesCarryTheTtl) {
  RemoteOptions o = options();
  o.ttl = std::chrono::seconds(100);
  auto with_ttl = make_tier(o);
  o.ttl = std::chrono::seconds(0);
  auto forever = make_tier(o);
  Digest a = hash_bytes("a"), b = hash_bytes("b");
  with_ttl->put_async(a, "x");
  forever->put_async(b, "y");
  with_ttl->flush_for_testing();
  forever->flush_for_testing();
  long long ttl = raw({"TTL", with_ttl->value_key(a)}).integer;
  EXPECT_GT(ttl, 0);
  EXPECT_LE(ttl, 100);
  EXPECT_EQ(raw({"TTL", forever->value_key(b)}).integer, -1);  // exists, no expiry
}

TEST_F(RemoteTest, AuthUsesThePasswordFile) {
  start_server({"--requirepass", "s3cret"});
  const std::string& dir = ccpool::testing::scratch_dir();
  ASSERT_TRUE(write_file_atomic(dir + "/pw", "s3cret\n", 0600));
  ASSERT_TRUE(write_file_atomic(dir + "/wrong", "nope\n", 0600));
  RemoteOptions o = options();
  o.password_file = dir + "/pw";
  auto good = make_tier(o);
  o.password_file = dir + "/wrong";
  auto wrong = make_tier(o);
  auto none = make_tier(options());

  Digest k = hash_bytes("auth");
  good->put_async(k, "value");
  good->flush_for_testing();
  EXPECT_EQ(good->counters().writes, 1u);
  auto got = good->get(k);
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, "value");
  EXPECT_FALSE(wrong->get(k));
  EXPECT_FALSE(none->get(k));
  EXPECT_EQ(wrong->counters().errors, 1u);
  EXPECT_EQ(none->counters().errors, 1u);
  EXPECT_EQ(wrong->counters().hits + none->counters().hits, 0u);
}

TEST_F(RemoteTest, UnixSocketWithDatabase) {
  std::string sock = ccpool::testing::scratch_dir() + "/redis.sock";
  start_server({"--unixsocket", sock, "--unixsocketperm", "700"});
  RemoteOptions o = options();
  o.url = "unix://" + sock + "?db=2";
  auto tier = make_tier(o);
  Digest k = hash_bytes("unix");
  tier->put_async(k, "over a unix socket");
  tier->flush_for_testing();
  auto got = tier->get(k);
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, "over a unix socket");
  EXPECT_EQ(raw({"EXISTS", tier->value_key(k)}).integer, 0);  // db 0 stays empty
}

}  // namespace
}  // namespace ccpool::remote
