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

// Up to 2 KiB a body is stored raw, however well it would compress; above
// that, compressed when that makes it smaller.
TEST(CodecTest, SmallBodiesAreStoredRaw) {
  Codec codec(1);
  for (size_t size : {size_t{0}, size_t{1}, size_t{1024}, size_t{2048}, size_t{2049}}) {
    std::string data(size, 'x');
    std::string stored = codec.encode(data);
    EXPECT_EQ(stored[0], size <= 2048 ? 0 : 1) << size;
    EXPECT_EQ(stored.size(), size <= 2048 ? 9 + size : stored.size()) << size;
    auto out = codec.decode(stored, hash_bytes(data), "body", data.size());
    ASSERT_TRUE(out) << out.error().message;
    EXPECT_EQ(*out, data);
    EXPECT_FALSE(codec.decode(stored, hash_bytes(data + "y"), "body", data.size() + 1));
  }
}

TEST(CodecTest, DeclaredSizeAboveTheCallersLimitIsRefusedBeforeDecoding) {
  Codec codec(1);
  std::string data(5000, 'a');  // above the raw limit: a zstd body whose header lies
  std::string stored = body_declaring(data, 1ull << 40);
  for (bool keep : {true, false}) {
    auto r = keep ? codec.decode(stored, hash_bytes(data), "body b1", 64 * kMiB).error()
                  : codec.verify(stored, hash_bytes(data), "body b1", 64 * kMiB).error();
    EXPECT_EQ(r.code, ErrorCode::kCorruption);
    EXPECT_NE(r.message.find(
                  "body b1: declares 1099511627776 raw bytes, more than the limit of 67108864"),
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
        r = keep ? codec.decode(stored, hash_bytes(data), "body", UINT64_MAX)
                       .map([](const std::string&) {})
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
  std::string stored = std::string("\x01", 1) +
                       std::string(reinterpret_cast<const char*>(&raw), 8) +
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

// `stored` (a zstd body) with the frame's Frame_Content_Size field taken out
// (RFC 8878, 3.1.1.1): the size flag and the single-segment flag cleared, and
// a Window_Descriptor of 64 KiB in their place. The blocks are untouched, so
// the frame still decodes to the same bytes; only the declared size is gone.
std::string without_content_size(const std::string& stored) {
  std::string frame = stored.substr(kBodyHeaderSize);
  auto descriptor = static_cast<uint8_t>(frame[4]);
  int size_flag = descriptor >> 6, single_segment = (descriptor >> 5) & 1;
  EXPECT_EQ(descriptor & 3, 0) << "no dictionary id expected";
  size_t size_bytes = size_flag == 0 ? single_segment : size_t{1} << size_flag;
  size_t header = 5 + (single_segment ? 0 : 1) + size_bytes;
  std::string out = frame.substr(0, 4);
  out.push_back(static_cast<char>(descriptor & 0x1f));
  out.push_back(static_cast<char>(6 << 3));  // window 2^(10 + 6)
  out += frame.substr(header);
  return stored.substr(0, kBodyHeaderSize) + out;
}

// A frame must declare its content size, equal to the body's raw_size
// (docs/store-format.md): zstd then sizes its buffers by it. A frame that
// declares none is refused even though its blocks decode to the right bytes.
TEST(CodecTest, AFrameWithoutItsContentSizeIsRefused) {
  Codec codec(1);
  std::string data = testing::random_bytes(2000, 4) + std::string(20000, 'c');
  Digest digest = hash_bytes(data);
  std::string stored = codec.encode(data);
  ASSERT_EQ(stored[0], 1) << "expected a zstd body";
  ASSERT_TRUE(codec.decode(stored, digest, "b", data.size()));
  std::string bare = without_content_size(stored);
  ASSERT_NE(bare, stored);
  for (bool keep : {true, false}) {
    Result<void> r =
        keep ? codec.decode(bare, digest, "b", data.size()).map([](const std::string&) {})
             : codec.verify(bare, digest, "b", data.size());
    ASSERT_FALSE(r) << (keep ? "decode" : "verify") << " took a frame without a content size";
    EXPECT_EQ(r.error().code, ErrorCode::kCorruption);
    EXPECT_NE(r.error().message.find("does not decode"), std::string::npos) << r.error().message;
  }
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
