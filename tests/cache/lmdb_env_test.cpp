// lmdb::Txn: the first failed operation decides the transaction (lmdb_env.h).
#include "cache/lmdb_env.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "tests/support/scratch.h"

namespace ccpool::cache::lmdb {
namespace {

std::unique_ptr<Env> open_env(uint64_t map_size) {
  std::unique_ptr<Env> env;
  EXPECT_EQ(Env::open(ccpool::testing::scratch_dir(), map_size, env), 0);
  return env;
}

// LMDB answers every call after a failed one with MDB_BAD_TXN; the wrapper
// answers with the failure that caused it, so MDB_MAP_FULL stays visible.
TEST(LmdbTxnTest, EveryCallAfterAFailureReturnsThatFailureAndNothingCommits) {
  auto env = open_env(256 * 1024);
  ASSERT_TRUE(env);
  std::unique_ptr<Txn> txn;
  ASSERT_EQ(Txn::begin(*env, true, txn), 0);
  ASSERT_EQ(txn->put(Table::kMeta, "small", "1"), 0);
  EXPECT_EQ(txn->failure(), 0);
  EXPECT_EQ(txn->put(Table::kMeta, "huge", std::string(1 << 20, 'x')), kMapFull);
  EXPECT_EQ(txn->failure(), kMapFull);
  std::string_view value;
  EXPECT_EQ(txn->put(Table::kMeta, "after", "2"), kMapFull);
  EXPECT_EQ(txn->del(Table::kMeta, "small"), kMapFull);
  EXPECT_EQ(txn->get(Table::kMeta, "small", value), kMapFull);
  EXPECT_EQ(txn->drop_all(Table::kRecords), kMapFull);
  EXPECT_EQ(txn->scan(Table::kMeta, "", [](std::string_view, std::string_view) { return true; }),
            kMapFull);
  EXPECT_EQ(txn->count(Table::kMeta), 0u);
  EXPECT_EQ(txn->commit(), kMapFull);

  ASSERT_EQ(Txn::begin(*env, false, txn), 0);
  EXPECT_EQ(txn->get(Table::kMeta, "small", value), kNotFound);
  EXPECT_EQ(txn->get(Table::kMeta, "after", value), kNotFound);
}

TEST(LmdbTxnTest, NotFoundIsNotAFailure) {
  auto env = open_env(256 * 1024);
  ASSERT_TRUE(env);
  std::unique_ptr<Txn> txn;
  ASSERT_EQ(Txn::begin(*env, true, txn), 0);
  std::string_view value;
  EXPECT_EQ(txn->get(Table::kMeta, "absent", value), kNotFound);
  EXPECT_EQ(txn->del(Table::kMeta, "absent"), kNotFound);
  EXPECT_EQ(txn->failure(), 0);
  ASSERT_EQ(txn->put(Table::kMeta, "present", "1"), 0);
  ASSERT_EQ(txn->commit(), 0);
  ASSERT_EQ(Txn::begin(*env, false, txn), 0);
  ASSERT_EQ(txn->get(Table::kMeta, "present", value), 0);
  EXPECT_EQ(value, "1");
}

}  // namespace
}  // namespace ccpool::cache::lmdb
