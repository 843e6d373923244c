// The one thin wrapper around LMDB: every mdb_* call of ccpool lives in
// lmdb_env.cpp. Functions return LMDB's int status (0 = success) so the store
// can branch on kMapFull/kMapResized; rc_text() names any status.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace ccpool::cache::lmdb {

extern const int kNotFound;    // MDB_NOTFOUND
extern const int kMapFull;     // MDB_MAP_FULL
extern const int kMapResized;  // MDB_MAP_RESIZED
bool is_corruption(int rc);    // MDB_INVALID, MDB_CORRUPTED, MDB_PAGE_NOTFOUND, version mismatch
std::string rc_text(int rc);

// The named tables of one store (docs/store-format.md).
enum class Table { kMeta = 0, kRecords, kUsage, kLru, kBodies, kRefs };
inline constexpr int kTableCount = 6;

struct EnvInfo {
  uint64_t map_size = 0, map_used = 0;
};

class Env {
 public:
  // Opens <dir>/data.mdb (+lock.mdb) with MDB_NOTLS | MDB_NOMETASYNC; creates the tables,
  // adopting the map size of another process that grew the data meanwhile. `before_begin`
  // (a test seam) runs before each try to begin the transaction that opens the tables.
  static int open(const std::string& dir, uint64_t map_size, std::unique_ptr<Env>& out,
                  const std::function<void()>& before_begin = {});
  ~Env();
  Env(const Env&) = delete;
  Env& operator=(const Env&) = delete;

  // Caller guarantees no transaction of this process is open. 0 adopts another process's size.
  int set_map_size(uint64_t bytes);
  EnvInfo info() const;
  int reader_check(int* dead);
  int sync();
  void* raw() const { return m_env; }
  unsigned dbi(Table t) const { return m_dbi[static_cast<int>(t)]; }

 private:
  Env() = default;
  void* m_env = nullptr;  // MDB_env*
  unsigned m_dbi[kTableCount] = {};
};

// One transaction; aborted on destruction unless committed. Belongs to one
// thread while open (MDB_NOTLS lets a read txn move between threads).
//
// The first failed operation decides the transaction's fate. LMDB marks a
// write transaction unusable after any failure (MDB_MAP_FULL while copying
// the first page a del touches, for one): every later call returns MDB_BAD_TXN
// and commit() refuses. This wrapper keeps the first failing status (kNotFound
// is not a failure) and returns it from every later call and from commit(),
// which then aborts; so a caller that ignored one status still sees the cause,
// and the store can grow the map and write again instead of reporting
// MDB_BAD_TXN.
class Txn {
 public:
  static int begin(Env& env, bool write, std::unique_ptr<Txn>& out);
  ~Txn();
  Txn(const Txn&) = delete;
  Txn& operator=(const Txn&) = delete;

  // On success `value` views the map; valid until the txn ends or, in a write txn, the next write.
  int get(Table t, std::string_view key, std::string_view& value);
  int put(Table t, std::string_view key, std::string_view value);
  int del(Table t, std::string_view key);  // kNotFound when absent
  int drop_all(Table t);                   // empties the table
  uint64_t count(Table t);
  // Visits entries in key order starting at the first key >= `from`; stop by returning false.
  using Visitor = std::function<bool(std::string_view key, std::string_view value)>;
  int scan(Table t, std::string_view from, const Visitor& visit);
  int commit();  // the first failure instead, when an operation failed (the txn is aborted)
  void abort();
  int failure() const { return m_failed; }  // 0 while every operation succeeded

 private:
  Txn(Env& env, void* txn) : m_env(env), m_txn(txn) {}
  int track(int rc);  // records the first failure; returns rc
  Env& m_env;
  void* m_txn;       // MDB_txn*, null once ended
  int m_failed = 0;  // the first failing status of an operation
};

}  // namespace ccpool::cache::lmdb
