// Codec::decode/verify never allocate what a body header claims (issue 12).
#include "cache/codec.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include "tests/cache/crafted.h"
#include "tests/cache/store_fixture.h"
#include "tests/support/peak_rss.h"

namespace ccpool::cache {
namespace {

using testing::body_declaring;

constexpr uint64_t kMiB = 1ull << 20;

TEST(CodecTest, RoundTripsAndVerifies) {
  Codec codec(1);
  std::string data = testing::random_bytes(300000, 3) + std::string(300000, 'x');
  std::string stored = codec.encode(data);
  auto out = codec.decode(stored, hash_bytes(data), "body", data.size());
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(*out, data);
  EXPECT_TRUE(codec.verify(stored, hash_bytes(data), "body", data.size()));
  EXPECT_FALSE(codec.verify(stored, hash_bytes("other"), "body", data.size()));
}

TEST(CodecTest, DeclaredSizeAboveTheCallersLimitIsRefusedBeforeDecoding) {
  Codec codec(1);
  std::string data(1000, 'a');
  std::string stored = body_declaring(data, 1ull << 40);
  for (bool keep : {true, false}) {
    auto r = keep ? codec.decode(stored, hash_bytes(data), "body b1", 64 * kMiB).error()
                  : codec.verify(stored, hash_bytes(data), "body b1", 64 * kMiB).error();
    EXPECT_EQ(r.code, ErrorCode::kCorruption);
    EXPECT_NE(r.message.find("body b1: declares 1099511627776 raw bytes, more than the limit of 67108864"),
              std::string::npos)
        << r.message;
  }
}

// A 1 TiB claim within a huge limit: the output buffer grows only as zstd
// really produces bytes, so it fails as corrupt at the real size.
TEST(CodecTest, ALyingRawSizeCostsOnlyWhatReallyDecodes) {
  Codec codec(1);
  std::string data(100000, 'z');
  for (uint64_t declared : {uint64_t{1} << 40, 512 * kMiB}) {
    std::string stored = body_declaring(data, declared);
    ASSERT_LT(stored.size(), 1000u);
    for (bool keep : {true, false}) {
      Result<void> r;
      uint64_t growth = ccpool::testing::peak_rss_growth([&] {
        r = keep ? codec.decode(stored, hash_bytes(data), "body", UINT64_MAX).map([](const std::string&) {})
                 : codec.verify(stored, hash_bytes(data), "body", UINT64_MAX);
      });
      ASSERT_NE(growth, UINT64_MAX) << "cannot reset the peak RSS (/proc/self/clear_refs)";
      ASSERT_FALSE(r);
      EXPECT_EQ(r.error().code, ErrorCode::kCorruption);
      EXPECT_LT(growth, 8 * kMiB) << "declared " << declared << (keep ? " (decode)" : " (verify)");
    }
  }
}

// verify() keeps nothing: a genuine 256 MiB body of zeros (a 10 KB zstd
// frame) is checked in one 256 KiB slice.
TEST(CodecTest, VerifyOfAGenuineBombUsesOneSlice) {
  Codec codec(3);
  std::string zeros(256 * kMiB, '\0');
  Digest digest = hash_bytes(zeros);
  std::string stored = codec.encode(zeros);
  zeros = std::string();
  ASSERT_LT(stored.size(), 64 * 1024u);
  Result<void> r;
  uint64_t growth = ccpool::testing::peak_rss_growth(
      [&] { r = codec.verify(stored, digest, "body", 256 * kMiB); });
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_LT(growth, 8 * kMiB);
}

// Found by codec_fuzz with -malloc_limit_mb: a 10-byte zstd frame whose
// header asks for a 40 MB window and declares no content size made zstd
// allocate the window (and the pooled context kept it). Frames must declare
// their content size, equal to raw_size, and windows above 8 MiB are refused.
TEST(CodecTest, AFrameAskingForAHugeWindowAllocatesNothing) {
  Codec codec(1);
  uint64_t raw = 12320;
  std::string stored = std::string("\x01", 1) + std::string(reinterpret_cast<const char*>(&raw), 8) +
                       std::string("\x28\xb5\x2f\xfd\x00\x7a\x7a\x4d\x01\x00", 10);
  auto held = [] {
    struct mallinfo2 m = mallinfo2();
    return m.hblkhd + m.uordblks;
  };
  size_t before = held();
  for (int i = 0; i < 2; ++i) {
    EXPECT_FALSE(codec.decode(stored, hash_bytes("x"), "body", UINT64_MAX));
    EXPECT_FALSE(codec.verify(stored, hash_bytes("x"), "body", UINT64_MAX));
  }
  size_t after = held();
  EXPECT_LT(after > before ? after - before : 0, 4 * kMiB);
  // Our own frames still decode, including a large one at the highest level we write.
  Codec high(19);
  std::string data = testing::random_bytes(3 * kMiB, 8) + std::string(6 * kMiB, 'w');
  auto back = high.decode(high.encode(data), hash_bytes(data), "body", data.size());
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, data);
}

TEST(CodecTest, TruncatedLongAndTrailingFramesAreCorrupt) {
  Codec codec(1);
  std::string data(50000, 'q');
  std::string stored = codec.encode(data);
  Digest digest = hash_bytes(data);
  EXPECT_FALSE(codec.decode(stored.substr(0, stored.size() - 3), digest, "b", UINT64_MAX));
  EXPECT_FALSE(codec.decode(stored + "x", digest, "b", UINT64_MAX));
  EXPECT_FALSE(codec.decode(body_declaring(data, data.size() - 1), digest, "b", UINT64_MAX));
  EXPECT_FALSE(codec.decode(body_declaring(data, data.size() + 1), digest, "b", UINT64_MAX));
  EXPECT_FALSE(codec.decode(std::string("\x01\x00", 2), digest, "b", UINT64_MAX));
  EXPECT_TRUE(codec.decode(stored, digest, "b", data.size()));
}

}  // namespace
}  // namespace ccpool::cache
