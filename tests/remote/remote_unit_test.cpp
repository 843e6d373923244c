// Remote tier pieces that need no Redis: URL parsing, the value envelope,
// the circuit breaker and Tier::create's option and file checks.
#include <gtest/gtest.h>

#include <chrono>

#include "base/fs.h"
#include "remote/breaker.h"
#include "remote/endpoint.h"
#include "remote/envelope.h"
#include "remote/tier.h"
#include "tests/support/scratch.h"

namespace ccpool::remote {
namespace {

using std::chrono::milliseconds;

TEST(RemoteEndpoint, ParsesTcpForms) {
  auto a = parse_endpoint("redis://");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 6379);
  EXPECT_EQ(a->db, 0);
  auto b = parse_endpoint("redis://cache.internal:7000/3");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->host, "cache.internal");
  EXPECT_EQ(b->port, 7000);
  EXPECT_EQ(b->db, 3);
  auto c = parse_endpoint("redis://[::1]:6380");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->host, "::1");
  EXPECT_EQ(c->port, 6380);
  EXPECT_EQ(c->describe(), "redis://[::1]:6380");
}

TEST(RemoteEndpoint, ParsesUnix) {
  auto e = parse_endpoint("unix:///run/redis/redis.sock?db=2");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind, Endpoint::Kind::kUnix);
  EXPECT_EQ(e->path, "/run/redis/redis.sock");
  EXPECT_EQ(e->db, 2);
  EXPECT_FALSE(parse_endpoint("unix://relative.sock"));
}

TEST(RemoteEndpoint, RefusesWithClearErrors) {
  auto tls = parse_endpoint("rediss://h:6380");
  ASSERT_FALSE(tls);
  EXPECT_EQ(tls.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(tls.error().message.find("without SSL"), std::string::npos);
  auto creds = parse_endpoint("redis://user:hunter2@h:6379");
  ASSERT_FALSE(creds);
  EXPECT_EQ(creds.error().message.find("hunter2"), std::string::npos) << "password leaked";
  EXPECT_NE(creds.error().message.find("CCPOOL_REMOTE_PASSWORD_FILE"), std::string::npos);
  EXPECT_FALSE(parse_endpoint("redis://h:0"));
  EXPECT_FALSE(parse_endpoint("redis://h:99999"));
  EXPECT_FALSE(parse_endpoint("redis://h:12ab"));
  EXPECT_FALSE(parse_endpoint("http://h"));
}

Digest digest_of(std::string_view s) {
  return hash_bytes(s);
}

TEST(RemoteEnvelope, UnsignedLayoutAndRoundTrip) {
  Digest k = digest_of("k");
  std::string sealed = seal(k, "hello", "");
  ASSERT_EQ(sealed.size(), kEnvelopeHeader + 5);
  EXPECT_EQ(sealed.substr(0, 4), "CCPR");
  EXPECT_EQ(static_cast<uint8_t>(sealed[4]), kEnvelopeVersion);
  EXPECT_EQ(sealed[5], 0);
  EXPECT_EQ(static_cast<uint8_t>(sealed[8]), 5);  // little-endian length
  EXPECT_EQ(open_envelope(k, sealed, ""), OpenStatus::kOk);
  EXPECT_EQ(sealed, "hello");
}

TEST(RemoteEnvelope, RejectsGarbageAndTruncation) {
  Digest k = digest_of("k");
  std::string garbage = "definitely not an envelope";
  EXPECT_EQ(open_envelope(k, garbage, ""), OpenStatus::kMalformed);
  std::string truncated = seal(k, std::string(100, 'x'), "");
  truncated.pop_back();
  EXPECT_EQ(open_envelope(k, truncated, ""), OpenStatus::kMalformed);
  std::string empty;
  EXPECT_EQ(open_envelope(k, empty, ""), OpenStatus::kMalformed);
}

TEST(RemoteEnvelope, SignatureBindsKeyAndValue) {
  const std::string key_a = "0123456789abcdef0123";
  const std::string key_b = "fedcba9876543210fedc";
  Digest k = digest_of("k");
  std::string sealed = seal(k, "payload", key_a);
  ASSERT_EQ(sealed.size(), kEnvelopeHeader + kEnvelopeMac + 7);
  EXPECT_EQ(sealed[5], 1);

  std::string good = sealed;
  EXPECT_EQ(open_envelope(k, good, key_a), OpenStatus::kOk);
  EXPECT_EQ(good, "payload");

  std::string other_key = sealed;
  EXPECT_EQ(open_envelope(k, other_key, key_b), OpenStatus::kBadSignature);
  std::string replayed = sealed;
  EXPECT_EQ(open_envelope(digest_of("other"), replayed, key_a), OpenStatus::kBadSignature);
  std::string tampered = sealed;
  tampered.back() ^= 1;
  EXPECT_EQ(open_envelope(k, tampered, key_a), OpenStatus::kBadSignature);
  std::string unsigned_value = seal(k, "payload", "");
  EXPECT_EQ(open_envelope(k, unsigned_value, key_a), OpenStatus::kBadSignature);
  std::string garbage = "garbage";
  EXPECT_EQ(open_envelope(k, garbage, key_a), OpenStatus::kBadSignature);

  // A reader without a key accepts signed values (it cannot check them).
  std::string lenient = sealed;
  EXPECT_EQ(open_envelope(k, lenient, ""), OpenStatus::kOk);
  EXPECT_EQ(lenient, "payload");
}

class FakeClock {
 public:
  CircuitBreaker::TimePoint now() const { return m_now; }
  void advance(milliseconds d) { m_now += d; }

 private:
  CircuitBreaker::TimePoint m_now{};
};

TEST(RemoteBreaker, OpensAfterThresholdAndProbesOncePerCooldown) {
  FakeClock clock;
  CircuitBreaker breaker(3, milliseconds(1000), [&] { return clock.now(); });
  breaker.record_failure();
  breaker.record_failure();
  breaker.record_success();  // a success resets the streak
  breaker.record_failure();
  breaker.record_failure();
  EXPECT_FALSE(breaker.is_open());
  EXPECT_TRUE(breaker.allow());
  breaker.record_failure();
  EXPECT_TRUE(breaker.is_open());
  EXPECT_EQ(breaker.times_opened(), 1u);
  EXPECT_FALSE(breaker.allow());

  clock.advance(milliseconds(999));
  EXPECT_FALSE(breaker.allow());
  clock.advance(milliseconds(1));
  EXPECT_TRUE(breaker.allow());   // the probe
  EXPECT_FALSE(breaker.allow());  // only one
  breaker.record_failure();       // probe failed: another full cooldown
  EXPECT_TRUE(breaker.is_open());
  EXPECT_EQ(breaker.times_opened(), 1u);
  clock.advance(milliseconds(500));
  EXPECT_FALSE(breaker.allow());
  clock.advance(milliseconds(500));
  EXPECT_TRUE(breaker.allow());
  breaker.record_success();
  EXPECT_FALSE(breaker.is_open());
  EXPECT_TRUE(breaker.allow());
  EXPECT_EQ(breaker.times_opened(), 1u);
}

TEST(RemoteTierCreate, NamesMissingOrBadFiles) {
  const std::string& dir = ccpool::testing::scratch_dir();
  RemoteOptions o;
  o.url = "redis://127.0.0.1:1";
  o.password_file = dir + "/no-such-password";
  auto missing = Tier::create(o);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find(o.password_file), std::string::npos);

  ASSERT_TRUE(write_file_atomic(dir + "/empty", "\n", 0600));
  o.password_file = dir + "/empty";
  auto empty = Tier::create(o);
  ASSERT_FALSE(empty);
  EXPECT_NE(empty.error().message.find("empty"), std::string::npos);

  o.password_file.clear();
  ASSERT_TRUE(write_file_atomic(dir + "/short.key", "short\n", 0600));
  o.hmac_key_file = dir + "/short.key";
  auto short_key = Tier::create(o);
  ASSERT_FALSE(short_key);
  EXPECT_NE(short_key.error().message.find("short.key"), std::string::npos);

  o.hmac_key_file.clear();
  o.url = "rediss://127.0.0.1:1";
  auto tls = Tier::create(o);
  ASSERT_FALSE(tls);
  EXPECT_EQ(tls.error().code, ErrorCode::kUnsupported);

  o.url = "redis://127.0.0.1:1";
  o.lease_ttl = milliseconds(1);
  EXPECT_FALSE(Tier::create(o));
}

TEST(RemoteTierCreate, NeedsNoRedisAndFailsSoftWhenNoneListens) {
  RemoteOptions o;
  o.url = "redis://127.0.0.1:1";  // nothing listens on port 1
  o.breaker_failures = 2;
  auto tier = Tier::create(o);
  ASSERT_TRUE(tier) << tier.error().message;
  Digest k = hash_bytes("k");
  EXPECT_FALSE((*tier)->get(k));
  EXPECT_EQ((*tier)->acquire_lease(k), LeaseState::kUnavailable);
  EXPECT_FALSE((*tier)->get(k));  // breaker open: not attempted
  RemoteCounters c = (*tier)->counters();
  EXPECT_EQ(c.errors, 2u);
  EXPECT_EQ(c.breaker_opened, 1u);
  EXPECT_TRUE(c.breaker_open);
  EXPECT_EQ(c.breaker_rejected, 1u);
  EXPECT_EQ(c.hits + c.misses, 0u);
  EXPECT_EQ((*tier)->value_key(k), "ccpool:obj:" + k.hex());
  EXPECT_EQ((*tier)->lease_key(k), "ccpool:lease:" + k.hex());
}

}  // namespace
}  // namespace ccpool::remote
