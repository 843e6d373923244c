#include "cache/lmdb_env.h"

#include <lmdb.h>
#include <sys/stat.h>

namespace ccpool::cache::lmdb {
namespace {

constexpr const char* kTableNames[kTableCount] = {"meta", "records", "usage",
                                                  "lru",  "bodies",  "refs"};
// Each MDB_MAP_RESIZED while opening means another process grew the map and
// committed in between; growth doubles, so a few in a row already are rare.
constexpr int kMaxOpenResizes = 16;

MDB_val to_val(std::string_view s) {
  return MDB_val{s.size(), const_cast<char*>(s.data())};
}
std::string_view from_val(const MDB_val& v) {
  return {static_cast<const char*>(v.mv_data), v.mv_size};
}

}  // namespace

const int kNotFound = MDB_NOTFOUND;
const int kMapFull = MDB_MAP_FULL;
const int kMapResized = MDB_MAP_RESIZED;

bool is_corruption(int rc) {
  return rc == MDB_INVALID || rc == MDB_CORRUPTED || rc == MDB_PAGE_NOTFOUND ||
         rc == MDB_VERSION_MISMATCH || rc == MDB_BAD_DBI || rc == MDB_INCOMPATIBLE;
}

std::string rc_text(int rc) {
  return mdb_strerror(rc);
}

int Env::open(const std::string& dir, uint64_t map_size, std::unique_ptr<Env>& out,
              const std::function<void()>& before_begin) {
  std::unique_ptr<Env> env(new Env());
  MDB_env* raw = nullptr;
  int rc = mdb_env_create(&raw);
  if (rc != 0) return rc;
  env->m_env = raw;
  if ((rc = mdb_env_set_maxdbs(raw, kTableCount)) != 0) return rc;
  if ((rc = mdb_env_set_maxreaders(raw, 510)) != 0) return rc;
  if ((rc = mdb_env_set_mapsize(raw, map_size)) != 0) return rc;
  // NOTLS: read txns are not tied to threads (oneTBB multiplexes tasks).
  // NOMETASYNC: data pages are fsynced at commit, the meta page at the next
  // commit or flush(); an OS crash may drop the last commit but never corrupts,
  // and a killed process loses nothing that committed.
  if ((rc = mdb_env_open(raw, dir.c_str(), MDB_NOTLS | MDB_NOMETASYNC, 0600)) != 0) return rc;
  int dead = 0;
  mdb_reader_check(raw, &dead);
  MDB_txn* txn = nullptr;
  for (int resized = 0;; ++resized) {
    if (before_begin) before_begin();
    rc = mdb_txn_begin(raw, nullptr, 0, &txn);
    if (rc != MDB_MAP_RESIZED || resized == kMaxOpenResizes) break;
    // Another process grew the map since ours was set: adopt the size recorded
    // in the file (0) and begin again, as LMDB asks. It may grow again before
    // that begin, when several processes grow one store at once.
    if ((rc = mdb_env_set_mapsize(raw, 0)) != 0) return rc;
  }
  if (rc != 0) return rc;
  for (int i = 0; i < kTableCount; ++i) {
    if ((rc = mdb_dbi_open(txn, kTableNames[i], MDB_CREATE, &env->m_dbi[i])) != 0) {
      mdb_txn_abort(txn);
      return rc;
    }
  }
  if ((rc = mdb_txn_commit(txn)) != 0) return rc;
  out = std::move(env);
  return 0;
}

Env::~Env() {
  if (m_env) mdb_env_close(static_cast<MDB_env*>(m_env));
}

int Env::set_map_size(uint64_t bytes) {
  return mdb_env_set_mapsize(static_cast<MDB_env*>(m_env), bytes);
}

EnvInfo Env::info() const {
  MDB_envinfo info;
  MDB_stat st;
  EnvInfo out;
  if (mdb_env_info(static_cast<MDB_env*>(m_env), &info) == 0 &&
      mdb_env_stat(static_cast<MDB_env*>(m_env), &st) == 0) {
    out.map_size = info.me_mapsize;
    out.map_used = (static_cast<uint64_t>(info.me_last_pgno) + 1) * st.ms_psize;
  }
  return out;
}

int Env::reader_check(int* dead) {
  return mdb_reader_check(static_cast<MDB_env*>(m_env), dead);
}
int Env::sync() {
  return mdb_env_sync(static_cast<MDB_env*>(m_env), 1);
}

int Txn::begin(Env& env, bool write, std::unique_ptr<Txn>& out) {
  MDB_txn* txn = nullptr;
  int rc = mdb_txn_begin(static_cast<MDB_env*>(env.raw()), nullptr, write ? 0 : MDB_RDONLY, &txn);
  if (rc != 0) return rc;
  out.reset(new Txn(env, txn));
  return 0;
}

Txn::~Txn() {
  abort();
}

void Txn::abort() {
  if (m_txn) mdb_txn_abort(static_cast<MDB_txn*>(m_txn));
  m_txn = nullptr;
}

int Txn::track(int rc) {
  if (rc != 0 && rc != MDB_NOTFOUND && m_failed == 0) m_failed = rc;
  return rc;
}

int Txn::commit() {
  if (m_failed != 0) {
    abort();
    return m_failed;
  }
  int rc = mdb_txn_commit(static_cast<MDB_txn*>(m_txn));
  m_txn = nullptr;  // commit frees the txn even on failure
  return rc;
}

int Txn::get(Table t, std::string_view key, std::string_view& value) {
  if (m_failed != 0) return m_failed;
  MDB_val k = to_val(key), v;
  int rc = track(mdb_get(static_cast<MDB_txn*>(m_txn), m_env.dbi(t), &k, &v));
  if (rc == 0) value = from_val(v);
  return rc;
}

int Txn::put(Table t, std::string_view key, std::string_view value) {
  if (m_failed != 0) return m_failed;
  MDB_val k = to_val(key), v = to_val(value);
  return track(mdb_put(static_cast<MDB_txn*>(m_txn), m_env.dbi(t), &k, &v, 0));
}

int Txn::del(Table t, std::string_view key) {
  if (m_failed != 0) return m_failed;
  MDB_val k = to_val(key);
  return track(mdb_del(static_cast<MDB_txn*>(m_txn), m_env.dbi(t), &k, nullptr));
}

int Txn::drop_all(Table t) {
  if (m_failed != 0) return m_failed;
  return track(mdb_drop(static_cast<MDB_txn*>(m_txn), m_env.dbi(t), 0));
}

uint64_t Txn::count(Table t) {
  MDB_stat st;
  if (m_failed != 0 || track(mdb_stat(static_cast<MDB_txn*>(m_txn), m_env.dbi(t), &st)) != 0)
    return 0;
  return st.ms_entries;
}

int Txn::scan(Table t, std::string_view from, const Visitor& visit) {
  if (m_failed != 0) return m_failed;
  MDB_cursor* cursor = nullptr;
  int rc = track(mdb_cursor_open(static_cast<MDB_txn*>(m_txn), m_env.dbi(t), &cursor));
  if (rc != 0) return rc;
  MDB_val k = to_val(from), v;
  rc = from.empty() ? mdb_cursor_get(cursor, &k, &v, MDB_FIRST)
                    : mdb_cursor_get(cursor, &k, &v, MDB_SET_RANGE);
  while (rc == 0) {
    if (!visit(from_val(k), from_val(v))) break;
    rc = mdb_cursor_get(cursor, &k, &v, MDB_NEXT);
  }
  mdb_cursor_close(cursor);
  return track(rc == MDB_NOTFOUND ? 0 : rc);
}

}  // namespace ccpool::cache::lmdb
