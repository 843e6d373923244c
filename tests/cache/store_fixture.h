// Shared helpers for the cache tests: a store in the test's scratch dir,
// deterministic keys and incompressible payloads.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>

#include "cache/lmdb_env.h"
#include "cache/store.h"
#include "tests/support/scratch.h"

namespace ccpool::cache::testing {

inline StoreOptions options() {
  StoreOptions o;
  o.dir = ccpool::testing::scratch_dir() + "/store";
  o.initial_map_size = 1 << 20;
  return o;
}

inline std::unique_ptr<Store> open_store(const StoreOptions& o = options()) {
  auto store = Store::open(o);
  EXPECT_TRUE(store) << store.error().message;
  return store ? std::move(*store) : nullptr;
}

inline Digest test_key(int i) {
  return hash_bytes("key-" + std::to_string(i));
}

inline std::string random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string out(n, '\0');
  for (size_t i = 0; i < n; i += 8) {
    uint64_t v = rng();
    std::memcpy(out.data() + i, &v, std::min<size_t>(8, n - i));
  }
  return out;
}

inline Entry make_entry(const std::string& name, size_t size, uint64_t seed = 1) {
  Entry e;
  e.tool = "cc";
  e.argv = {"cc", "-c", name};
  e.outputs.push_back({name, 0644, 0, {}, random_bytes(size, seed)});
  return e;
}

// Writes the meta schema version directly, as an older or newer ccpool would have.
inline void set_schema_version(const std::string& dir, uint32_t version) {
  std::unique_ptr<lmdb::Env> env;
  ASSERT_EQ(lmdb::Env::open(dir, 1 << 20, env), 0);
  std::unique_ptr<lmdb::Txn> txn;
  ASSERT_EQ(lmdb::Txn::begin(*env, true, txn), 0);
  ASSERT_EQ(txn->put(lmdb::Table::kMeta, "schema",
                     std::string_view(reinterpret_cast<char*>(&version), 4)),
            0);
  ASSERT_EQ(txn->commit(), 0);
}

}  // namespace ccpool::cache::testing
