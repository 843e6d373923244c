// Archive import and packed entries from outside (issue 12): a crafted file
// or value costs at most a small multiple of its own size, and pass 2 of an
// import checks every body again.
#include <gtest/gtest.h>

#include <fstream>

#include "tests/cache/crafted.h"
#include "tests/cache/store_fixture.h"
#include "tests/support/peak_rss.h"

namespace ccpool::cache {
namespace {

using testing::archive_of;
using testing::ArchiveItem;
using testing::open_store;
using testing::packed_declaring;
using testing::test_key;

constexpr uint64_t kMiB = 1ull << 20;

std::string write_file(const std::string& name, const std::string& bytes) {
  std::string path = ccpool::testing::scratch_dir() + "/" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

StoreOptions big_store() {
  StoreOptions o = testing::options();
  o.max_size = 4ull << 30;  // the limits under test are the decoders', not max_size
  return o;
}

// The 291-byte archive: one entry whose body claims 512 MiB (main
// zero-filled that much before decompressing 100 KB).
TEST(ArchiveTest, ImportOfABodyThatLiesAboutItsSizeIsBoundedAndRefused) {
  auto store = open_store(big_store());
  std::string archive =
      archive_of({{test_key(1), packed_declaring(std::string(100000, 'a'), 512 * kMiB)}});
  ASSERT_LT(archive.size(), 1000u);
  std::string path = write_file("lying-body.ccpool", archive);
  Result<ArchiveResult> r;
  uint64_t growth = ccpool::testing::peak_rss_growth([&] { r = store->import_from(path); });
  ASSERT_NE(growth, UINT64_MAX) << "cannot reset the peak RSS (/proc/self/clear_refs)";
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kCorruption);
  EXPECT_NE(r.error().message.find("lying-body.ccpool"), std::string::npos) << r.error().message;
  EXPECT_LT(growth, 16 * kMiB);
  EXPECT_EQ(store->stats()->entries, 0u);
}

// An entry length of 600 MiB in a file that ends after 40 bytes: main
// zero-filled the declared length before reading.
TEST(ArchiveTest, ImportOfAnEntryLengthBeyondTheFileIsBoundedAndTruncated) {
  auto store = open_store(big_store());
  ArchiveItem item{test_key(1), std::string(40, 'p'), 600 * kMiB};
  std::string path = write_file("long-entry.ccpool", archive_of({item}, false));
  Result<ArchiveResult> r;
  uint64_t growth = ccpool::testing::peak_rss_growth([&] { r = store->import_from(path); });
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("truncated"), std::string::npos) << r.error().message;
  EXPECT_LT(growth, 16 * kMiB);
}

// The same lie arriving as a packed value (the Redis tier's path).
TEST(ArchiveTest, PutPackedOfABodyThatLiesAboutItsSizeIsBounded) {
  auto store = open_store(big_store());
  std::string packed = packed_declaring(std::string(100000, 'b'), 512 * kMiB);
  Result<void> r;
  uint64_t growth =
      ccpool::testing::peak_rss_growth([&] { r = store->put_packed(test_key(2), packed); });
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kCorruption);
  EXPECT_LT(growth, 16 * kMiB);
  EXPECT_FALSE(*store->peek(test_key(2), false));
}

// Raw sizes whose sum wraps around 2^64, or that exceed max_size: refused
// before any body is looked at.
TEST(ArchiveTest, PutPackedRefusesRawSizesBeyondMaxSize) {
  auto store = open_store();
  Record rec;
  rec.outputs.push_back({"a", 0644, BodyRef{UINT64_MAX - 10, hash_bytes("a")}});
  rec.outputs.push_back({"b", 0644, BodyRef{20, hash_bytes("b")}});
  auto r = store->put_packed(test_key(3), pack_entry(encode_record(rec), {}));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kFull);
  EXPECT_NE(r.error().message.find("max_size"), std::string::npos) << r.error().message;
}

// The file is replaced between pass 1 and pass 2 by one whose body has other
// bytes under the same digest (checksums recomputed, as anyone can). Pass 2
// must not store bytes it did not check.
TEST(ArchiveTest, ImportPassTwoChecksEveryBodyAgain) {
  auto store = open_store();
  std::string good_data(5000, 'g');
  std::string evil_data(5000, 'e');
  Record rec;
  rec.tool = "cc";
  rec.outputs.push_back({"k.o", 0644, BodyRef{good_data.size(), hash_bytes(good_data)}});
  std::string record = encode_record(rec);
  Codec codec(1);
  std::string good = archive_of(
      {{test_key(1), pack_entry(record, {{hash_bytes(good_data), codec.encode(good_data)}})}});
  std::string evil = archive_of(
      {{test_key(1), pack_entry(record, {{hash_bytes(good_data), codec.encode(evil_data)}})}});
  std::string path = write_file("swapped.ccpool", good);
  bool swapped = false;
  auto r = store->import_from(path, [&](uint64_t, uint64_t total) {
    if (total == 0 && !swapped) {  // pass 1 reports total 0
      std::ofstream(path, std::ios::binary | std::ios::trunc) << evil;
      swapped = true;
    }
  });
  ASSERT_TRUE(swapped);
  EXPECT_FALSE(r) << "pass 2 imported a body it did not check";
  if (!r) {
    EXPECT_NE(r.error().message.find("changed while it was imported"), std::string::npos)
        << r.error().message;
  }
  auto verified = store->verify(false);
  ASSERT_TRUE(verified);
  EXPECT_TRUE(verified->corrupt.empty());
  EXPECT_FALSE(*store->get(test_key(1)));
}

// An entry longer than any entry the store could hold (4 x max_size + 1 MiB)
// is hashed through in slices and skipped, never kept in memory; the other
// entries are imported.
TEST(ArchiveTest, AnEntryTooLongForTheStoreIsSkippedWithoutBeingKept) {
  StoreOptions o = testing::options();
  o.max_size = 1 * kMiB;  // entries of more than 5 MiB cannot fit
  auto store = open_store(o);
  Codec codec(1);
  std::string data(1000, 'k');
  Record rec;
  rec.tool = "cc";
  rec.outputs.push_back({"k.o", 0644, BodyRef{data.size(), hash_bytes(data)}});
  std::string small = pack_entry(encode_record(rec), {{hash_bytes(data), codec.encode(data)}});
  std::string huge = testing::random_bytes(24 * kMiB, 7);
  std::string path = write_file(
      "long.ccpool", archive_of({{test_key(1), small}, {test_key(2), huge}, {test_key(3), small}}));
  huge = std::string();
  Result<ArchiveResult> r;
  uint64_t growth = ccpool::testing::peak_rss_growth([&] { r = store->import_from(path); });
  ASSERT_NE(growth, UINT64_MAX) << "cannot reset the peak RSS (/proc/self/clear_refs)";
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->entries, 2u);
  EXPECT_EQ(r->skipped, 1u);
  EXPECT_LT(growth, 12 * kMiB);
  EXPECT_TRUE(*store->peek(test_key(1), false));
  EXPECT_FALSE(*store->peek(test_key(2), false));
  EXPECT_TRUE(*store->peek(test_key(3), false));
}

// The trailer covers every byte: an archive whose entries are intact but
// whose trailer is damaged is refused, and nothing is written.
TEST(ArchiveTest, ADamagedTrailerIsRefusedBeforeAnythingIsWritten) {
  auto store = open_store();
  Codec codec(1);
  std::string data(3000, 't');
  Record rec;
  rec.tool = "cc";
  rec.outputs.push_back({"k.o", 0644, BodyRef{data.size(), hash_bytes(data)}});
  std::string archive = archive_of(
      {{test_key(1), pack_entry(encode_record(rec), {{hash_bytes(data), codec.encode(data)}})}});
  archive.back() = static_cast<char>(archive.back() ^ 1);
  auto r = store->import_from(write_file("trailer.ccpool", archive));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kCorruption);
  EXPECT_NE(r.error().message.find("fails its checksum"), std::string::npos) << r.error().message;
  EXPECT_EQ(store->stats()->entries, 0u);
}

}  // namespace
}  // namespace ccpool::cache
