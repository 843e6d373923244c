// The Redis front's storage with a cluster tier, against a real redis-server:
// a key deleted here is never fetched back from the tier (even when the tier
// holds its old value again), and every GET reads the node store once, the
// tombstone check included. Counts LMDB read transactions, not time.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "cache/record.h"
#include "service/store_kv.h"
#include "tests/remote/redis_server.h"
#include "tests/support/scratch.h"

namespace ccpool::service {
namespace {

class RedisEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { ccpool::testing::exit_125_without_redis(); }
};
[[maybe_unused]] ::testing::Environment* const g_redis_env =
    ::testing::AddGlobalTestEnvironment(new RedisEnvironment);

// One node: its own store, a tier on the shared redis-server, the front's
// storage over both.
struct Node {
  Node(const std::string& dir, const std::string& url) {
    cache::StoreOptions options;
    options.dir = dir;
    auto opened = cache::Store::open(options);
    EXPECT_TRUE(opened) << opened.error().message;
    store = std::move(*opened);
    remote::RemoteOptions remote;
    remote.url = url;
    remote.connect_timeout = remote.op_timeout = std::chrono::milliseconds(2000);
    remote.validate = [](std::string_view v) {
      return cache::unpack_entry(v).has_value();
    };  // as the service does
    auto created = remote::Tier::create(remote);
    EXPECT_TRUE(created) << created.error().message;
    tier = std::move(*created);
    storage = std::make_unique<Storage>(*store, tier.get());
    kv = std::make_unique<StoreKv>(*storage);
  }
  ~Node() {
    kv.reset();
    storage.reset();
    tier.reset();
  }
  uint64_t reads() const { return store->read_transactions(); }

  std::unique_ptr<cache::Store> store;
  std::unique_ptr<remote::Tier> tier;
  std::unique_ptr<Storage> storage;
  std::unique_ptr<StoreKv> kv;
};

class StoreKvTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = ccpool::testing::RedisServer::start(ccpool::testing::scratch_dir());
    ASSERT_TRUE(server) << server.error().message;
    m_server = std::move(*server);
    m_a = std::make_unique<Node>(ccpool::testing::scratch_dir() + "/a", m_server->url());
    m_b = std::make_unique<Node>(ccpool::testing::scratch_dir() + "/b", m_server->url());
  }
  void TearDown() override {
    m_a.reset();
    m_b.reset();
  }
  // What the tier holds under `key`, read by a node that keeps no copy.
  std::optional<std::string> in_tier(const Digest& key) { return m_b->tier->get(key); }

  std::unique_ptr<ccpool::testing::RedisServer> m_server;
  std::unique_ptr<Node> m_a, m_b;
};

TEST_F(StoreKvTierTest, DeletedKeyIsNotServedEvenWhenTheTierHoldsItsOldValue) {
  Digest key = StoreKv::store_key("k");
  ASSERT_TRUE(m_a->kv->set("k", "old", 0));
  m_a->tier->flush_for_testing();
  std::optional<std::string> old_value = in_tier(key);
  ASSERT_TRUE(old_value);

  ASSERT_TRUE(m_a->kv->del("k"));
  m_a->tier->flush_for_testing();
  std::optional<std::string> tombstone = in_tier(key);
  ASSERT_TRUE(tombstone);
  ASSERT_NE(*tombstone, *old_value);
  // The tier gets the old value back (a write from before the DEL landing late).
  m_b->tier->put_async(key, *old_value);
  m_b->tier->flush_for_testing();
  ASSERT_EQ(in_tier(key), old_value);

  uint64_t remote_before = m_a->tier->counters().hits + m_a->tier->counters().misses;
  uint64_t reads_before = m_a->reads();
  EXPECT_EQ(m_a->kv->get("k"), std::nullopt);
  // One read of the node store found the tombstone; the tier was not asked.
  EXPECT_EQ(m_a->reads() - reads_before, 1u);
  EXPECT_EQ(m_a->tier->counters().hits + m_a->tier->counters().misses, remote_before);
  EXPECT_FALSE(m_a->kv->exists("k"));
  EXPECT_EQ(m_a->kv->expires_at("k"), -2);
  EXPECT_EQ(m_a->kv->remote_hits(), 0u);

  // A node without the tombstone does fetch what the tier holds.
  EXPECT_EQ(m_b->kv->get("k"), "old");
  EXPECT_EQ(m_b->kv->remote_hits(), 1u);
}

TEST_F(StoreKvTierTest, EveryGetReadsTheNodeStoreOnce) {
  ASSERT_TRUE(m_a->kv->set("here", "v", 0));
  uint64_t before = m_a->reads();
  EXPECT_EQ(m_a->kv->get("here"), "v");
  EXPECT_EQ(m_a->reads() - before, 1u);

  // Nowhere: one local read, then the tier's miss.
  before = m_a->reads();
  uint64_t misses_before = m_a->tier->counters().misses;
  EXPECT_EQ(m_a->kv->get("nowhere"), std::nullopt);
  EXPECT_EQ(m_a->reads() - before, 1u);
  EXPECT_EQ(m_a->tier->counters().misses, misses_before + 1);

  // Only in the tier: the local miss, then the read-back of the adopted value.
  ASSERT_TRUE(m_b->kv->set("there", "w", 0));
  m_b->tier->flush_for_testing();
  before = m_a->reads();
  EXPECT_EQ(m_a->kv->get("there"), "w");
  EXPECT_EQ(m_a->reads() - before, 2u);
  EXPECT_EQ(m_a->kv->remote_hits(), 1u);
  // Now local: one read again.
  before = m_a->reads();
  EXPECT_EQ(m_a->kv->get("there"), "w");
  EXPECT_EQ(m_a->reads() - before, 1u);
}

TEST_F(StoreKvTierTest, ExpiredLocalValueStillAsksTheTier) {
  // A value that expired here is not a DEL: the tier may hold a newer one.
  Digest key = StoreKv::store_key("ttl");
  ASSERT_TRUE(m_b->kv->set("ttl", "fresh", 0));
  m_b->tier->flush_for_testing();
  ASSERT_TRUE(m_a->storage->local().put(key, [] {
    cache::Entry e;
    e.kind = cache::EntryKind::kBlob;
    e.label = "ttl";
    e.tool = "redis";
    e.expires_ms = 1000;  // long past, and not the tombstone's mark
    e.outputs.push_back(cache::Output{"value", 0644, 0, {}, "stale"});
    return e;
  }()));
  EXPECT_EQ(m_a->kv->get("ttl"), "fresh");
  EXPECT_EQ(m_a->kv->remote_hits(), 1u);
}

}  // namespace
}  // namespace ccpool::service
