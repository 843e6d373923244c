// parse_manifest never moves backwards or past its input (issue 12: a length
// near 2^64 wrapped `pos + len`, so one 100 KB blob cost 980 MB).
#include "compiler/manifest.h"

#include <gtest/gtest.h>

#include "tests/support/peak_rss.h"

namespace ccpool::compiler {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

TEST(ManifestTest, RoundTrips) {
  Manifest m;
  ManifestEntry e;
  e.result_key = hash_bytes("r");
  e.files.push_back({"a b\n:c.h", hash_bytes("a")});
  e.negatives.push_back("x/y.h");
  m.entries.push_back(e);
  auto back = parse_manifest(serialize_manifest(m));
  ASSERT_TRUE(back);
  ASSERT_EQ(back->entries.size(), 1u);
  EXPECT_EQ(back->entries[0].files, e.files);
  EXPECT_EQ(back->entries[0].negatives, e.negatives);
}

// "n <len>:" where pos + len wraps to the '\n' before the line: on main each
// of the 2,000 negatives copied the 100 KB rest of the blob and jumped back.
TEST(ManifestTest, ALengthThatWrapsIsRefusedAtOnce) {
  std::string head = "ccpool-manifest v1\nentry " + hash_bytes("r").hex() + " -1 0 2000\n";
  uint64_t len = 0 - uint64_t{24};  // "n " + 20 digits + ":" = 23 bytes, back to the '\n'
  std::string line = "n " + std::to_string(len) + ":";
  ASSERT_EQ(line.size(), 23u);
  std::string blob = head + line + std::string(100000, 'p') + "\n";
  std::optional<Manifest> parsed;
  uint64_t growth = ccpool::testing::peak_rss_growth([&] { parsed = parse_manifest(blob); });
  ASSERT_NE(growth, UINT64_MAX) << "cannot reset the peak RSS (/proc/self/clear_refs)";
  EXPECT_FALSE(parsed);
  EXPECT_LT(growth, 16 * kMiB);
}

TEST(ManifestTest, LengthsAndDigestsPastTheEndAreRefused) {
  std::string head = "ccpool-manifest v1\nentry " + hash_bytes("r").hex() + " -1 1 0\n";
  EXPECT_FALSE(parse_manifest(head + "f " + hash_bytes("a").hex() + " 5:ab\n"));
  EXPECT_FALSE(parse_manifest(head + "f " + hash_bytes("a").hex().substr(0, 20)));
  EXPECT_FALSE(parse_manifest(head + "f " + hash_bytes("a").hex() + " 18446744073709551615:ab\n"));
  EXPECT_TRUE(parse_manifest(head + "f " + hash_bytes("a").hex() + " 2:ab\n"));
}

}  // namespace
}  // namespace ccpool::compiler
