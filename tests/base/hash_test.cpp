#include "base/hash.h"

#include <gtest/gtest.h>

#include "base/fs.h"
#include "tests/support/scratch.h"

namespace ccpool {
namespace {

TEST(Hash, HexRoundTrip) {
  Digest d = hash_bytes("hello");
  EXPECT_EQ(d.hex().size(), 32u);
  auto back = Digest::from_hex(d.hex());
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, d);
  EXPECT_FALSE(Digest::from_hex("xyz"));
  EXPECT_FALSE(Digest::from_hex(std::string(32, 'g')));
}

TEST(Hash, FieldsAreLengthPrefixed) {
  Hasher a, b;
  a.add_field("ab");
  a.add_field("c");
  b.add_field("a");
  b.add_field("bc");
  EXPECT_NE(a.digest(), b.digest());
}

TEST(Hash, StreamingMatchesOneShot) {
  Hasher h;
  h.update("hel");
  h.update("lo");
  EXPECT_EQ(h.digest(), hash_bytes("hello"));
}

TEST(Hash, FileMatchesBytes) {
  std::string path = testing::scratch_dir() + "/f";
  std::string data(200000, 'x');
  ASSERT_TRUE(write_file_atomic(path, data, 0644));
  auto d = hash_file(path);
  ASSERT_TRUE(d);
  EXPECT_EQ(*d, hash_bytes(data));
  EXPECT_EQ(hash_file(path + ".missing").error().code, ErrorCode::kNotFound);
}

}  // namespace
}  // namespace ccpool
