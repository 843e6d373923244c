// Unit tests of cache/store.cpp and friends: round trip, dedup, corruption,
// LRU eviction, map growth, schema and filesystem checks.
#include "cache/store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/stat.h>

#include <random>

#include "cache/codec.h"
#include "tests/cache/store_fixture.h"

namespace ccpool::cache {
namespace {

using testing::make_entry;
using testing::open_store;
using testing::random_bytes;
using testing::test_key;

TEST(StoreTest, RoundTripKeepsEveryField) {
  auto store = open_store();
  Entry in = make_entry("obj", 5000);
  in.outputs.push_back({"k.so", 0755, 0, {}, random_bytes(70000, 3)});
  in.stdout_data = "warning: something\n";
  in.stderr_data = std::string(3000, 'e');
  in.exit_code = 3;
  in.tool = "g++";
  in.cwd = "/tmp/build";
  in.argv = {"g++", "-c", "a.cpp", "-o", "a.o"};
  in.inputs = {"a.cpp", "a.h"};
  in.label = "pt2:abc";
  in.time_saved_ms = 1234;
  in.kind = EntryKind::kBlob;
  ASSERT_TRUE(store->put(test_key(1), in));
  auto got = store->get(test_key(1));
  ASSERT_TRUE(got && *got);
  const Entry& e = **got;
  ASSERT_EQ(e.outputs.size(), 2u);
  EXPECT_EQ(e.outputs[0].data, in.outputs[0].data);
  EXPECT_EQ(e.outputs[1].data, in.outputs[1].data);
  EXPECT_EQ(e.outputs[1].mode, 0755u);
  EXPECT_EQ(e.outputs[1].size, 70000u);
  EXPECT_EQ(e.outputs[1].checksum, hash_bytes(in.outputs[1].data));
  EXPECT_EQ(e.stdout_data, in.stdout_data);
  EXPECT_EQ(e.stderr_data, in.stderr_data);
  EXPECT_EQ(e.exit_code, 3);
  EXPECT_EQ(e.tool, "g++");
  EXPECT_EQ(e.cwd, "/tmp/build");
  EXPECT_EQ(e.argv, in.argv);
  EXPECT_EQ(e.inputs, in.inputs);
  EXPECT_EQ(e.label, "pt2:abc");
  EXPECT_EQ(e.time_saved_ms, 1234u);
  EXPECT_EQ(e.kind, EntryKind::kBlob);
  EXPECT_GT(e.created_ms, 0);
  EXPECT_FALSE(*store->get(test_key(2)));
  auto stats = store->stats();
  ASSERT_TRUE(stats);
  EXPECT_EQ(stats->entries, 1u);
  EXPECT_EQ(stats->hits, 1u);
  EXPECT_EQ(stats->misses, 1u);
  EXPECT_EQ(stats->time_saved_ms, 1234u);
  EXPECT_EQ(stats->logical_bytes, 5000u + 70000u + in.stdout_data.size() + 3000u);
  EXPECT_LT(stats->stored_bytes, stats->logical_bytes);  // the 'e' run and text compress
}

// The seam (base/fault.h): the store's injector is the one its options hand
// it, counting this store's writes only.
TEST(StoreTest, InjectedWriteFailureIsTheNthWriteOfThisStore) {
  FaultInjector faults("fail_store_write=2");
  StoreOptions o = testing::options();
  o.faults = &faults;
  auto store = open_store(o);
  ASSERT_TRUE(store->put(test_key(1), make_entry("a", 100)));
  auto failed = store->put(test_key(2), make_entry("b", 100));
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().code, ErrorCode::kIo);
  EXPECT_NE(failed.error().message.find("injected by CCPOOL_FAULT=fail_store_write"),
            std::string::npos);
  ASSERT_TRUE(store->put(test_key(3), make_entry("c", 100)));
  EXPECT_FALSE(*store->get(test_key(2)));
}

TEST(StoreTest, SurvivesReopenAndFlushesHits) {
  {
    auto store = open_store();
    ASSERT_TRUE(store->put(test_key(1), make_entry("a", 100)));
    ASSERT_TRUE(store->get(test_key(1)));
    ASSERT_TRUE(store->get(test_key(1)));
  }
  auto store = open_store();
  auto e = store->peek(test_key(1), false);
  ASSERT_TRUE(e && *e);
  EXPECT_EQ((*e)->hits, 2u);
  EXPECT_TRUE((*e)->outputs[0].data.empty());  // peek without bodies
  EXPECT_EQ((*e)->outputs[0].size, 100u);
}

TEST(StoreTest, EventCountersPersistAndAreBounded) {
  {
    auto store = open_store();
    store->count_event("passthrough:multiple_sources");
    store->count_event("passthrough:multiple_sources", 2);
    store->count_event("not_stored:time_macro");
  }  // the destructor flushes
  {
    auto store = open_store();
    store->count_event("not_stored:time_macro");
    auto s = store->stats();  // flushes first
    ASSERT_TRUE(s);
    EXPECT_EQ(s->events["passthrough:multiple_sources"], 3u);
    EXPECT_EQ(s->events["not_stored:time_macro"], 2u);
    for (size_t i = 0; i < Store::kMaxEvents + 10; ++i) store->count_event("e" + std::to_string(i));
    store->count_event(std::string(1000, 'n'));
  }
  auto store = open_store();
  auto s = store->stats();
  ASSERT_TRUE(s);
  EXPECT_LE(s->events.size(), Store::kMaxEvents + 1);
  EXPECT_GT(s->events["other"], 0u);
  for (const auto& [name, n] : s->events) EXPECT_LE(name.size(), Store::kMaxEventName);
}

TEST(StoreTest, IdenticalBodiesAreStoredOnceAndRefcounted) {
  auto store = open_store();
  Entry a = make_entry("x.so", 200000, 7);
  Entry b = make_entry("y.so", 200000, 7);  // same bytes, other name and key
  ASSERT_TRUE(store->put(test_key(1), a));
  auto one = store->stats();
  ASSERT_TRUE(store->put(test_key(2), b));
  auto two = store->stats();
  EXPECT_EQ(two->bodies, 1u);
  EXPECT_EQ(two->entries, 2u);
  EXPECT_EQ(two->logical_bytes, 2 * one->logical_bytes);
  EXPECT_LT(two->stored_bytes - one->stored_bytes, 1000u);  // only the second record
  ASSERT_TRUE(*store->remove(test_key(1)));
  auto left = store->get(test_key(2));
  ASSERT_TRUE(left && *left);
  EXPECT_EQ((*left)->outputs[0].data, b.outputs[0].data);
  EXPECT_EQ(store->stats()->bodies, 1u);
  ASSERT_TRUE(*store->remove(test_key(2)));
  EXPECT_FALSE(*store->remove(test_key(2)));
  auto empty = store->stats();
  EXPECT_EQ(empty->bodies, 0u);
  EXPECT_EQ(empty->stored_bytes, 0u);
  EXPECT_EQ(empty->logical_bytes, 0u);
}

TEST(StoreTest, ReplacingAnEntryReleasesItsOldBodies) {
  auto store = open_store();
  ASSERT_TRUE(store->put(test_key(1), make_entry("a", 1000, 1)));
  ASSERT_TRUE(store->put(test_key(1), make_entry("a", 1000, 2)));
  auto s = store->stats();
  EXPECT_EQ(s->entries, 1u);
  EXPECT_EQ(s->bodies, 1u);
  EXPECT_EQ((*store->get(test_key(1)))->outputs[0].data, random_bytes(1000, 2));
}

TEST(StoreTest, CorruptBodyIsAMissAndVerifyFindsAndFixesIt) {
  auto store = open_store();
  ASSERT_TRUE(store->put(test_key(1), make_entry("good", 50000, 1)));
  ASSERT_TRUE(store->put(test_key(2), make_entry("bad", 50000, 2)));
  ASSERT_TRUE(store->put(test_key(3), make_entry("bad2", 50000, 3)));
  ASSERT_TRUE(store->corrupt_body_for_testing(test_key(2), 0));
  ASSERT_TRUE(store->corrupt_body_for_testing(test_key(3), 0));
  auto report = store->verify(false);
  ASSERT_TRUE(report);
  EXPECT_EQ(report->checked_entries, 3u);
  ASSERT_EQ(report->corrupt.size(), 2u);
  EXPECT_EQ(report->removed, 0u);
  // get() never serves the corrupt entry: it is a miss, evicted and counted.
  auto got = store->get(test_key(2));
  ASSERT_TRUE(got);
  EXPECT_FALSE(*got);
  EXPECT_FALSE(*store->peek(test_key(2), false));
  auto s = store->stats();
  EXPECT_EQ(s->corrupt_evictions, 1u);
  EXPECT_EQ(s->misses, 1u);
  auto fixed = store->verify(true);
  ASSERT_EQ(fixed->corrupt.size(), 1u);
  EXPECT_EQ(fixed->corrupt[0].key, test_key(3));
  EXPECT_EQ(fixed->removed, 1u);
  EXPECT_TRUE(store->verify(false)->corrupt.empty());
  EXPECT_TRUE(*store->get(test_key(1)));
  EXPECT_EQ(store->stats()->entries, 1u);
}

// A compressible body whose zstd frame still decodes, to the right length, but to other bytes:
// only the XXH3 check after decompression can notice. The frame is swapped in under the stored
// digest with the store closed (one LMDB env per process).
TEST(StoreTest, CompressedBodyThatDecodesToOtherBytesIsAChecksumMismatchAndEvicted) {
  std::string good;
  for (int i = 0; good.size() < 60000; ++i)
    good += "static int f" + std::to_string(i % 97) + "(void) { return 0; }\n";
  Codec codec(1);
  const std::string stored_good = codec.encode(good);
  ASSERT_EQ(stored_good[0], 1) << "the body must be stored zstd-compressed for this test";
  // Same length, one byte different, and a frame of the same stored size so the counters stay
  // exact.
  std::string bad, stored_bad;
  for (size_t at = good.size() / 2; at < good.size(); ++at) {
    bad = good;
    bad[at] = bad[at] == 'x' ? 'y' : 'x';
    stored_bad = codec.encode(bad);
    if (stored_bad.size() == stored_good.size()) break;
  }
  ASSERT_EQ(stored_bad.size(), stored_good.size());
  ASSERT_EQ(stored_bad[0], 1);
  ASSERT_NE(bad, good);
  auto decoded = codec.decode(stored_bad, hash_bytes(good), "body", good.size());
  EXPECT_FALSE(decoded) << "the codec served bytes whose checksum is not the expected one";
  if (!decoded) EXPECT_EQ(decoded.error().message, "body: checksum mismatch");

  StoreOptions o = testing::options();
  {
    auto store = open_store(o);
    Entry e = make_entry("k.o", 10);
    e.outputs[0].data = good;
    ASSERT_TRUE(store->put(test_key(1), e));
    ASSERT_TRUE(store->put(test_key(2), make_entry("other.o", 5000, 7)));
  }
  {
    std::unique_ptr<lmdb::Env> env;
    ASSERT_EQ(lmdb::Env::open(o.dir, 1 << 20, env), 0);
    std::unique_ptr<lmdb::Txn> txn;
    ASSERT_EQ(lmdb::Txn::begin(*env, true, txn), 0);
    Digest digest = hash_bytes(good);
    std::string_view body_key(reinterpret_cast<const char*>(digest.bytes.data()),
                              digest.bytes.size());
    std::string_view current;
    ASSERT_EQ(txn->get(lmdb::Table::kBodies, body_key, current), 0);
    ASSERT_EQ(current, stored_good);
    ASSERT_EQ(txn->put(lmdb::Table::kBodies, body_key, stored_bad), 0);
    ASSERT_EQ(txn->commit(), 0);
  }
  auto store = open_store(o);
  auto report = store->verify(false);
  ASSERT_TRUE(report);
  EXPECT_EQ(report->corrupt.size(), 1u);
  if (!report->corrupt.empty()) {
    EXPECT_EQ(report->corrupt[0].key, test_key(1));
    EXPECT_THAT(report->corrupt[0].problem, ::testing::HasSubstr("checksum mismatch"));
  }

  auto got = store->get(test_key(1));
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_FALSE(*got) << "get() served the corrupt body";
  auto s = store->stats();
  EXPECT_EQ(s->corrupt_evictions, 1u);
  EXPECT_EQ(s->entries, 1u);
  EXPECT_EQ(s->bodies, 1u);
  EXPECT_EQ(s->misses, 1u);
  EXPECT_FALSE(*store->peek(test_key(1), false));
  EXPECT_EQ((*store->get(test_key(2)))->outputs[0].data, random_bytes(5000, 7));
  EXPECT_TRUE(store->verify(false)->corrupt.empty());
}

TEST(StoreTest, EvictsLeastRecentlyUsedFirstAndStaysUnderMaxSize) {
  StoreOptions options = testing::options();
  options.max_size = 400 * 1024;
  auto store = open_store(options);
  // Incompressible 100 KiB outputs: about three fit.
  for (int i = 1; i <= 3; ++i) {
    Entry e = make_entry("o", 100 * 1024, i);
    e.last_used_ms = 1000 * i;
    ASSERT_TRUE(store->put(test_key(i), e));
  }
  ASSERT_TRUE(*store->get(test_key(1)));  // key 1 becomes the most recent
  store->flush();
  for (int i = 4; i <= 5; ++i) {
    ASSERT_TRUE(store->put(test_key(i), make_entry("o", 100 * 1024, i)));
    EXPECT_LE(store->stats()->stored_bytes, options.max_size);
  }
  EXPECT_FALSE(*store->peek(test_key(2), false));
  EXPECT_FALSE(*store->peek(test_key(3), false));
  EXPECT_TRUE(*store->peek(test_key(1), false));
  EXPECT_TRUE(*store->peek(test_key(4), false));
  EXPECT_TRUE(*store->peek(test_key(5), false));
  EXPECT_EQ(store->stats()->evictions, 2u);
}

// A write never evicts what it writes, even when that is the least recently
// used (an entry put with an old last use) or when a batch is larger than
// max_size: a put reported stored is stored.
TEST(StoreTest, AWriteNeverEvictsTheEntriesItWrites) {
  StoreOptions options = testing::options();
  options.max_size = 250 * 1024;
  auto store = open_store(options);
  for (int i = 1; i <= 2; ++i) {
    Entry e = make_entry("o", 100 * 1024, i);
    e.last_used_ms = 1000 * (i + 1);
    ASSERT_TRUE(store->put(test_key(i), e));
  }
  Entry old = make_entry("o", 100 * 1024, 3);
  old.last_used_ms = 1000;  // older than anything in the store
  ASSERT_TRUE(store->put(test_key(3), old));
  EXPECT_TRUE(*store->peek(test_key(3), false));
  EXPECT_FALSE(*store->peek(test_key(1), false));  // the oldest of the others went instead
  EXPECT_TRUE(*store->peek(test_key(2), false));
  std::vector<PutRequest> batch;
  for (int i = 4; i <= 6; ++i) batch.push_back({test_key(i), make_entry("o", 100 * 1024, i)});
  for (const auto& r : store->put_batch(batch)) EXPECT_TRUE(r) << r.error().message;
  for (int i = 4; i <= 6; ++i) EXPECT_TRUE(*store->peek(test_key(i), false)) << i;
  EXPECT_FALSE(*store->peek(test_key(2), false));
  EXPECT_FALSE(*store->peek(test_key(3), false));
}

TEST(StoreTest, EntryLargerThanMaxSizeIsRefusedWithoutLosingOthers) {
  StoreOptions options = testing::options();
  options.max_size = 64 * 1024;
  auto store = open_store(options);
  ASSERT_TRUE(store->put(test_key(1), make_entry("small", 1000)));
  auto r = store->put(test_key(2), make_entry("huge", 200 * 1024));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kFull);
  EXPECT_TRUE(*store->get(test_key(1)));
}

TEST(StoreTest, MapGrowsFromATinyInitialMap) {
  StoreOptions options = testing::options();
  options.initial_map_size = 256 * 1024;
  auto store = open_store(options);
  uint64_t first = store->stats()->map_size;
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(store->put(test_key(i), make_entry("o", 128 * 1024, i)));
  auto s = store->stats();
  EXPECT_GT(s->map_size, first);
  EXPECT_EQ(s->entries, 40u);
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(*store->get(test_key(i))) << i;
}

TEST(StoreTest, AtTheMapCapItEvictsInsteadOfFailing) {
  StoreOptions options = testing::options();
  options.initial_map_size = 256 * 1024;
  options.max_map_size = 2 << 20;  // far below max_size: the map, not max_size, is the bound
  auto store = open_store(options);
  for (int i = 0; i < 60; ++i)
    ASSERT_TRUE(store->put(test_key(i), make_entry("o", 64 * 1024, i))) << i;
  auto s = store->stats();
  EXPECT_LE(s->map_size, 2u << 20);
  EXPECT_LT(s->entries, 60u);
  EXPECT_GT(s->evictions, 0u);
  EXPECT_TRUE(*store->get(test_key(59)));  // the newest survives
}

TEST(StoreTest, ExpiredEntriesMissAndGcRemovesThem) {
  auto store = open_store();
  Entry e = make_entry("o", 10);
  e.expires_ms = 1;  // long past
  ASSERT_TRUE(store->put(test_key(1), e));
  ASSERT_TRUE(store->put(test_key(2), make_entry("o", 10)));
  EXPECT_FALSE(*store->get(test_key(1)));
  auto r = store->gc({});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->expired, 1u);
  EXPECT_EQ(r->removed_entries, 1u);
  EXPECT_EQ(store->stats()->entries, 1u);
}

TEST(StoreTest, GcByAgeAndBySize) {
  auto store = open_store();
  for (int i = 1; i <= 4; ++i) {
    Entry e = make_entry("o", 10000, i);
    e.last_used_ms = i <= 2 ? 1000 : 0;  // 1,2 used at 1970; 3,4 now
    ASSERT_TRUE(store->put(test_key(i), e));
  }
  GcOptions by_age;
  by_age.older_than_ms = 3600 * 1000;
  EXPECT_EQ(store->gc(by_age)->removed_entries, 2u);
  EXPECT_TRUE(*store->peek(test_key(3), false));
  GcOptions by_size;
  by_size.max_size = 0;
  EXPECT_EQ(store->gc(by_size)->removed_entries, 2u);
  EXPECT_EQ(store->stats()->stored_bytes, 0u);
}

TEST(StoreTest, PackedEntryRoundTripsAndRejectsDamage) {
  auto store = open_store();
  Entry in = make_entry("k.so", 30000, 5);
  in.stderr_data = "note";
  ASSERT_TRUE(store->put(test_key(1), in));
  auto packed = store->get_packed(test_key(1));
  ASSERT_TRUE(packed && *packed);
  ASSERT_TRUE(store->put_packed(test_key(9), **packed));
  auto got = store->get(test_key(9));
  ASSERT_TRUE(got && *got);
  EXPECT_EQ((*got)->outputs[0].data, in.outputs[0].data);
  EXPECT_EQ((*got)->stderr_data, "note");
  std::string bad = **packed;
  bad[bad.size() / 2] ^= 1;
  auto r = store->put_packed(test_key(10), bad);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kCorruption);
  r = store->put_packed(test_key(10), std::string_view(**packed).substr(0, 100));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kCorruption);
  EXPECT_FALSE(*store->peek(test_key(10), false));
  EXPECT_FALSE(*store->get_packed(test_key(10)));
}

TEST(StoreTest, FindPrefixAndClear) {
  auto store = open_store();
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(store->put(test_key(i), make_entry("o", 10, i)));
  std::string hex = test_key(7).hex();
  auto one = store->find_prefix(hex.substr(0, 12));
  ASSERT_TRUE(one);
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0], test_key(7));
  EXPECT_FALSE(store->find_prefix(""));
  EXPECT_FALSE(store->find_prefix("xyz"));
  auto upper = hex.substr(0, 5);
  for (char& c : upper) c = static_cast<char>(toupper(c));
  EXPECT_GE(store->find_prefix(upper)->size(), 1u);
  EXPECT_EQ(*store->clear(), 20u);
  auto s = store->stats();
  EXPECT_EQ(s->entries, 0u);
  EXPECT_EQ(s->bodies, 0u);
}

TEST(StoreTest, RefusesNetworkFilesystemsThroughTheSeam) {
  StoreOptions options = testing::options();
  options.statfs_type = [](const std::string&) -> Result<int64_t> {
    return int64_t{NFS_SUPER_MAGIC};
  };
  auto r = Store::open(options);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(r.error().message.find("CCPOOL_DIR"), std::string::npos);
  EXPECT_NE(r.error().message.find("NFS"), std::string::npos);
  EXPECT_NE(r.error().message.find("/tmp"), std::string::npos);
  options.statfs_type = [](const std::string&) -> Result<int64_t> { return int64_t{0x47504653}; };
  EXPECT_NE(Store::open(options).error().message.find("GPFS"), std::string::npos);
  options.statfs_type = [](const std::string&) -> Result<int64_t> {
    return int64_t{EXT4_SUPER_MAGIC};
  };
  EXPECT_TRUE(Store::open(options));
}

TEST(StoreTest, CreatesThePrivateDirectoryAndRefusesASecondOpen) {
  StoreOptions options = testing::options();
  options.dir += "/nested/store";
  auto store = Store::open(options);
  ASSERT_TRUE(store) << store.error().message;
  struct stat st;
  ASSERT_EQ(::stat(options.dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  auto again = Store::open(options);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::kInvalidArgument);
  StoreOptions missing = testing::options();
  missing.dir += "/absent";
  missing.create_if_missing = false;
  EXPECT_EQ(Store::open(missing).error().code, ErrorCode::kNotFound);
}

TEST(StoreTest, NewerSchemaIsAClearError) {
  {
    auto store = open_store();
    ASSERT_TRUE(store->put(test_key(1), make_entry("o", 10)));
  }
  testing::set_schema_version(testing::options().dir, kSchemaVersion + 1);
  auto r = Store::open(testing::options());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(r.error().message.find("newer"), std::string::npos);
}

TEST(StoreTest, OlderSchemaIsClearedWithAMessage) {
  {
    auto store = open_store();
    ASSERT_TRUE(store->put(test_key(1), make_entry("o", 10)));
  }
  testing::set_schema_version(testing::options().dir, 0);
  auto store = open_store();
  EXPECT_EQ(store->stats()->entries, 0u);
  EXPECT_TRUE(store->put(test_key(1), make_entry("o", 10)));
}

TEST(StoreTest, NotAnLmdbFileIsCorruption) {
  std::string dir = testing::options().dir;
  ASSERT_TRUE(ensure_private_dir(dir));
  ASSERT_TRUE(write_file_atomic(dir + "/data.mdb", std::string(20000, 'x'), 0600));
  auto r = Store::open(testing::options());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kCorruption);
  EXPECT_NE(r.error().message.find(dir), std::string::npos);
}

}  // namespace
}  // namespace ccpool::cache
