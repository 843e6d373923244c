// The manifest text format (compiler/manifest.h): v3 round trip, bounds,
// and that v1/v2 manifests (made from a model of the compiler's reads, not a
// record of them) are never trusted.
#include "compiler/manifest.h"

#include <gtest/gtest.h>

#include "tests/support/peak_rss.h"

namespace ccpool::compiler {
namespace {

ManifestEntry sample_entry() {
  ManifestEntry e;
  e.result_key = hash_bytes("r");
  e.date_bucket = -1;
  e.files = {{"k.cpp", hash_bytes("k")}, {"pch/prefix.h.gch/a", hash_bytes("a")}};
  e.negatives = {"inc1/h.h"};
  e.absent = {"prefix.h.gch", "/usr/include/x y.h.gch"};
  e.dirs = {{"pch/prefix.h.gch", hash_bytes("names")}};
  e.checks = {{'e', "PWD", "=\x01/sub"}, {'k', "a b", "=/x\ny"}, {'a', "/usr/bin/as", "1:0"}};
  return e;
}

TEST(Manifest, V3RoundTripsAbsentPathsDirectoriesAndChecks) {
  Manifest m;
  m.entries = {sample_entry()};
  std::string text = serialize_manifest(m);
  EXPECT_EQ(text.rfind("ccpool-manifest v3\n", 0), 0u) << text;
  std::optional<Manifest> back = parse_manifest(text);
  ASSERT_TRUE(back);
  ASSERT_EQ(back->entries.size(), 1u);
  const ManifestEntry& e = back->entries[0];
  EXPECT_EQ(e.files, m.entries[0].files);
  EXPECT_EQ(e.negatives, m.entries[0].negatives);
  EXPECT_EQ(e.absent, m.entries[0].absent);
  EXPECT_EQ(e.dirs, m.entries[0].dirs);
  EXPECT_EQ(e.checks, m.entries[0].checks);
  EXPECT_EQ(serialize_manifest(*back), text);
}

TEST(Manifest, V1AndV2AreNotTrusted) {
  std::string v1 = "ccpool-manifest v1\nentry " + hash_bytes("r").hex() + " -1 1 0\nf " +
                   hash_bytes("k").hex() + " 5:k.cpp\n";
  EXPECT_FALSE(parse_manifest(v1));
  std::string v2 = "ccpool-manifest v2\nentry " + hash_bytes("r").hex() + " -1 1 0 0 0\nf " +
                   hash_bytes("k").hex() + " 5:k.cpp\n";
  EXPECT_FALSE(parse_manifest(v2));
}

TEST(Manifest, RejectsTruncationAndHugeLengths) {
  Manifest m;
  m.entries = {sample_entry()};
  std::string text = serialize_manifest(m);
  for (size_t cut = 1; cut < text.size(); cut += 7) {
    std::optional<Manifest> parsed = parse_manifest(text.substr(0, text.size() - cut));
    EXPECT_FALSE(parsed && parsed->entries.size() == 1) << "cut " << cut;
  }
  std::string head = "ccpool-manifest v3\nentry " + hash_bytes("r").hex() + " -1 0 0 1 0 0\na ";
  EXPECT_FALSE(parse_manifest(head + "18446744073709551615:x\n"));  // len would wrap pos + len
  EXPECT_FALSE(parse_manifest(head + "99:x\n"));
  std::string too_many =
      "ccpool-manifest v3\nentry " + hash_bytes("r").hex() + " -1 0 0 0 1001 0\n";
  EXPECT_FALSE(parse_manifest(too_many));
}

// "n <len>:" where pos + len wraps to the '\n' before the line: before the
// bounds were written as len > size - pos, each of the 2,000 negatives copied
// the 100 KB rest of the blob and jumped back (issue 12: 100 KB cost 980 MB).
TEST(Manifest, ALengthThatWrapsIsRefusedAtOnce) {
  std::string head = "ccpool-manifest v3\nentry " + hash_bytes("r").hex() + " -1 0 2000 0 0 0\n";
  uint64_t len = 0 - uint64_t{24};  // "n " + 20 digits + ":" = 23 bytes, back to the '\n'
  std::string line = "n " + std::to_string(len) + ":";
  ASSERT_EQ(line.size(), 23u);
  std::string blob = head + line + std::string(100000, 'p') + "\n";
  std::optional<Manifest> parsed;
  uint64_t growth = ccpool::testing::peak_rss_growth([&] { parsed = parse_manifest(blob); });
  ASSERT_NE(growth, UINT64_MAX) << "cannot reset the peak RSS (/proc/self/clear_refs)";
  EXPECT_FALSE(parsed);
  EXPECT_LT(growth, 16ull << 20);
}

TEST(Manifest, DigestsAndLengthsPastTheEndAreRefused) {
  std::string head = "ccpool-manifest v3\nentry " + hash_bytes("r").hex() + " -1 1 0 0 0 0\n";
  EXPECT_FALSE(parse_manifest(head + "f " + hash_bytes("a").hex() + " 5:ab\n"));
  EXPECT_FALSE(parse_manifest(head + "f " + hash_bytes("a").hex().substr(0, 20)));
  EXPECT_FALSE(parse_manifest(head + "f " + hash_bytes("a").hex() + " 18446744073709551615:ab\n"));
  EXPECT_TRUE(parse_manifest(head + "f " + hash_bytes("a").hex() + " 2:ab\n"));
}

}  // namespace
}  // namespace ccpool::compiler
