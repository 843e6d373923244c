// The manifest text format (compiler/manifest.h): v2 round trip, bounds,
// and that a v1 manifest (which recorded neither PCH candidates nor
// __has_include probes) is never trusted.
#include <gtest/gtest.h>

#include "compiler/manifest.h"

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
  return e;
}

TEST(Manifest, V2RoundTripsAbsentPathsAndDirectories) {
  Manifest m;
  m.entries = {sample_entry()};
  std::string text = serialize_manifest(m);
  EXPECT_EQ(text.rfind("ccpool-manifest v2\n", 0), 0u) << text;
  std::optional<Manifest> back = parse_manifest(text);
  ASSERT_TRUE(back);
  ASSERT_EQ(back->entries.size(), 1u);
  const ManifestEntry& e = back->entries[0];
  EXPECT_EQ(e.files, m.entries[0].files);
  EXPECT_EQ(e.negatives, m.entries[0].negatives);
  EXPECT_EQ(e.absent, m.entries[0].absent);
  EXPECT_EQ(e.dirs, m.entries[0].dirs);
  EXPECT_EQ(serialize_manifest(*back), text);
}

TEST(Manifest, V1IsNotTrusted) {
  std::string v1 = "ccpool-manifest v1\nentry " + hash_bytes("r").hex() + " -1 1 0\nf " +
                   hash_bytes("k").hex() + " 5:k.cpp\n";
  EXPECT_FALSE(parse_manifest(v1));
}

TEST(Manifest, RejectsTruncationAndHugeLengths) {
  Manifest m;
  m.entries = {sample_entry()};
  std::string text = serialize_manifest(m);
  for (size_t cut = 1; cut < text.size(); cut += 7) {
    std::optional<Manifest> parsed = parse_manifest(text.substr(0, text.size() - cut));
    EXPECT_FALSE(parsed && parsed->entries.size() == 1) << "cut " << cut;
  }
  std::string head = "ccpool-manifest v2\nentry " + hash_bytes("r").hex() + " -1 0 0 1 0\na ";
  EXPECT_FALSE(parse_manifest(head + "18446744073709551615:x\n"));  // len would wrap pos + len
  EXPECT_FALSE(parse_manifest(head + "99:x\n"));
  std::string too_many = "ccpool-manifest v2\nentry " + hash_bytes("r").hex() + " -1 0 0 0 1001\n";
  EXPECT_FALSE(parse_manifest(too_many));
}

}  // namespace
}  // namespace ccpool::compiler
