// Records carry a checksum (issue 12): a flipped bit anywhere in a stored
// record, exit code and mode included, is a miss, never a different result.
#include "cache/record.h"

#include <gtest/gtest.h>

#include "cache/bytes.h"
#include "cache/codec.h"
#include "cache/lmdb_env.h"
#include "tests/cache/store_fixture.h"
#include "tests/support/peak_rss.h"

namespace ccpool::cache {
namespace {

using testing::make_entry;
using testing::open_store;
using testing::test_key;

std::string read_record(const std::string& dir, const Digest& key) {
  std::unique_ptr<lmdb::Env> env;
  EXPECT_EQ(lmdb::Env::open(dir, 1 << 20, env), 0);
  std::unique_ptr<lmdb::Txn> txn;
  EXPECT_EQ(lmdb::Txn::begin(*env, false, txn), 0);
  std::string_view raw;
  EXPECT_EQ(txn->get(lmdb::Table::kRecords,
                     std::string_view(reinterpret_cast<const char*>(key.bytes.data()), 16), raw),
            0);
  return std::string(raw);
}

void write_record(const std::string& dir, const Digest& key, const std::string& value) {
  std::unique_ptr<lmdb::Env> env;
  ASSERT_EQ(lmdb::Env::open(dir, 1 << 20, env), 0);
  std::unique_ptr<lmdb::Txn> txn;
  ASSERT_EQ(lmdb::Txn::begin(*env, true, txn), 0);
  ASSERT_EQ(txn->put(lmdb::Table::kRecords,
                     std::string_view(reinterpret_cast<const char*>(key.bytes.data()), 16), value),
            0);
  ASSERT_EQ(txn->commit(), 0);
}

Entry sample() {
  Entry e = make_entry("k.so", 3000, 9);
  e.outputs[0].mode = 0755;
  e.exit_code = 0;
  e.stderr_data = "warning: x";
  return e;
}

TEST(RecordTest, EveryFlippedBitOfARecordIsRefused) {
  Record rec;
  rec.tool = "/usr/bin/cc";
  rec.exit_code = 0;
  rec.argv = {"cc", "-c", "k.c"};
  rec.outputs.push_back({"k.o", 0755, BodyRef{10, hash_bytes("k")}});
  std::string bytes = encode_record(rec);
  size_t accepted = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string flipped = bytes;
      flipped[i] ^= static_cast<char>(1 << bit);
      if (decode_record(flipped)) {
        ++accepted;
        ADD_FAILURE() << "byte " << i << " bit " << bit << " flipped and the record still decodes";
      }
    }
  }
  EXPECT_EQ(accepted, 0u);
}

// Flips in a stored record: the exit code (byte 26, docs/store-format.md)
// and an output's mode. Each must be a miss, counted as a corrupt eviction.
TEST(RecordTest, AFlippedExitCodeOrModeInTheStoreIsAMiss) {
  StoreOptions o = testing::options();
  std::string original;
  {
    auto store = open_store(o);
    ASSERT_TRUE(store->put(test_key(1), sample()));
  }
  original = read_record(o.dir, test_key(1));
  size_t mode_at = original.find(std::string("\xED\x01\x00\x00", 4));
  ASSERT_NE(mode_at, std::string::npos);
  for (size_t at : {size_t{26}, mode_at}) {
    std::string flipped = original;
    flipped[at] ^= 1;
    write_record(o.dir, test_key(1), flipped);
    auto store = open_store(o);
    auto got = store->get(test_key(1));
    ASSERT_TRUE(got) << got.error().message;
    EXPECT_FALSE(*got) << "byte " << at << " flipped and still served";
    EXPECT_EQ(store->stats()->corrupt_evictions, at == 26 ? 1u : 2u);
    ASSERT_TRUE(store->put(test_key(1), sample()));
  }
}

// A record of format 1 (no checksum), as an older ccpool wrote it: a miss,
// and the slot is refilled by the next put.
TEST(RecordTest, AnOlderRecordFormatIsAMissNotACrash) {
  StoreOptions o = testing::options();
  {
    auto store = open_store(o);
    ASSERT_TRUE(store->put(test_key(1), sample()));
  }
  std::string raw = read_record(o.dir, test_key(1));
  ASSERT_EQ(raw[0], 2);
  std::string v1 = raw.substr(0, raw.size() - kRecordChecksumSize);
  v1[0] = 1;
  write_record(o.dir, test_key(1), v1);
  auto store = open_store(o);
  auto got = store->get(test_key(1));
  ASSERT_TRUE(got);
  EXPECT_FALSE(*got);
  ASSERT_TRUE(store->put(test_key(1), sample()));
  got = store->get(test_key(1));
  ASSERT_TRUE(got && *got);
  EXPECT_EQ((**got).outputs[0].mode, 0755u);
}

TEST(RecordTest, DecodeRefusesNewerAndDamagedRecords) {
  Record rec;
  rec.exit_code = 3;
  rec.argv = {"cc", "-c"};
  std::string bytes = encode_record(rec);
  auto back = decode_record(bytes);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->exit_code, 3);
  std::string newer = bytes;
  newer[0] = 3;
  EXPECT_NE(decode_record(newer).error().message.find("newer"), std::string::npos);
  EXPECT_FALSE(decode_record(bytes.substr(0, 10)));
  EXPECT_FALSE(decode_record(""));
}

// A packed entry comes from outside (the Redis tier, archives): its trailer
// is checked before anything in it is parsed, so a flipped byte anywhere after
// the magic and version is reported as a checksum failure, never parsed.
TEST(RecordTest, EveryFlippedByteOfAPackedEntryFailsItsTrailer) {
  Codec codec(1);
  std::string data = testing::random_bytes(300, 6);
  Record rec;
  rec.tool = "cc";
  rec.outputs.push_back({"k.o", 0644, BodyRef{data.size(), hash_bytes(data)}});
  std::string packed =
      pack_entry(encode_record(rec), {PackedBody{hash_bytes(data), codec.encode(data)}});
  ASSERT_TRUE(unpack_entry(packed));
  int refused = 0;
  for (size_t i = 8; i < packed.size(); ++i) {
    std::string bad = packed;
    bad[i] = static_cast<char>(bad[i] ^ 0x20);
    auto r = unpack_entry(bad);
    if (!r && r.error().message.find("fails its checksum") != std::string::npos) ++refused;
  }
  EXPECT_EQ(refused, static_cast<int>(packed.size() - 8));
}

// A body count of 4 million in a 70-byte entry (with a valid trailer, as
// anyone can compute) is refused before anything is sized from it.
TEST(RecordTest, APackedEntryClaimingMillionsOfBodiesAllocatesNothing) {
  ByteWriter w;
  w.bytes("CCPE");
  w.u32(1);
  w.str(encode_record(Record{}));
  w.u32(4u << 20);
  Digest sum = hash_bytes(w.out());
  w.digest(sum);
  std::string packed = std::move(w.out());
  Result<UnpackedEntry> r;
  uint64_t growth = ccpool::testing::peak_rss_growth([&] { r = unpack_entry(packed); });
  ASSERT_NE(growth, UINT64_MAX) << "cannot reset the peak RSS (/proc/self/clear_refs)";
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("is malformed"), std::string::npos) << r.error().message;
  EXPECT_LT(growth, 16ull << 20);
}

}  // namespace
}  // namespace ccpool::cache
