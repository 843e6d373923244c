// cache_store_worker: a child process for the multi-process store tests.
//   write DIR ID COUNT SIZE   put COUNT entries "w<ID>-<i>", re-reading each
//   read DIR WRITERS COUNT SIZE ROUNDS  get random writer keys; any found must be byte-exact
//   hammer DIR SIZE           put entries forever, printing "committed <i>" after each
//   probe DIR touch|overwrite  open with a 256 KiB map, put w7-0 (and get it: touch), print
//                             "map <bytes>", wait for a line on stdin, then put w7-1 (touch) or
//                             w7-0 again (overwrite); print "put ok" or "put failed: <why>"
//   creep DIR STOP            commit one small value per transaction with a 64 MiB map and a
//                             read transaction held open, until the file STOP exists (at most 2000)
//   hold DIR                  open the environment, begin a read transaction, print "reading",
//                             and wait (the test kills it with SIGKILL)
//   grow DIR                  for each line N on stdin: set its map to 2N and commit 64 KiB values
//                             until the data passes N bytes, then print "grown <bytes>"
//   fill DIR PAGES            open the environment with a 64 MiB map, hold a read transaction
//                             (so no freed page is reused), then commit small transactions until
//                             the data ends within two pages of PAGES; print "filled <pages>", and
//                             keep the reader until stdin closes. Exit 3 if the data passed PAGES.
// Exits 0 on success, 1 on any store error or wrong bytes (message on stderr).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <string_view>

#include "cache/lmdb_env.h"
#include "cache/store.h"
#include "tests/cache/worker_data.h"

using namespace ccpool;
using namespace ccpool::cache;

namespace {

int die(const std::string& what) {
  std::fprintf(stderr, "cache_store_worker[%d]: %s\n", ::getpid(), what.c_str());
  return 1;
}

std::unique_ptr<Store> open_or_null(const std::string& dir) {
  StoreOptions o;
  o.dir = dir;
  o.initial_map_size = 256 * 1024;  // tiny: forces growth and MDB_MAP_RESIZED in the others
  auto s = Store::open(o);
  if (!s) {
    die("open: " + s.error().message);
    return nullptr;
  }
  return std::move(*s);
}

// Opens the environment at DIR with a map of map_size bytes and begins a read
// transaction in `reader` (held while the caller keeps it: no freed page is
// reused). 0, or die()'s exit status.
int open_with_reader(const std::string& dir, uint64_t map_size, std::unique_ptr<lmdb::Env>& env,
                     std::unique_ptr<lmdb::Txn>& reader) {
  if (int rc = lmdb::Env::open(dir, map_size, env); rc != 0)
    return die("open: " + lmdb::rc_text(rc));
  if (int rc = lmdb::Txn::begin(*env, false, reader); rc != 0)
    return die("begin read: " + lmdb::rc_text(rc));
  return 0;
}

// Puts key = value into the meta table in a write transaction of its own.
int commit_one(lmdb::Env& env, const std::string& key, std::string_view value) {
  std::unique_ptr<lmdb::Txn> txn;
  int rc = lmdb::Txn::begin(env, true, txn);
  if (rc == 0) rc = txn->put(lmdb::Table::kMeta, key, value);
  if (rc == 0) rc = txn->commit();
  return rc;
}

void wait_for_stdin_to_close() {
  char line[16];
  while (std::fgets(line, sizeof line, stdin)) {
  }
}

int write_mode(const std::string& dir, int id, int count, size_t size) {
  auto store = open_or_null(dir);
  if (!store) return 1;
  for (int i = 0; i < count; ++i) {
    Entry e = worker_entry(id, i, size);
    if (auto r = store->put(worker_key(id, i), e); !r) return die("put: " + r.error().message);
    auto got = store->get(worker_key(id, i));
    if (!got || !*got || (*got)->outputs.at(0).data != e.outputs[0].data)
      return die("read-back mismatch");
  }
  return 0;
}

int read_mode(const std::string& dir, int writers, int count, size_t size, int rounds) {
  auto store = open_or_null(dir);
  if (!store) return 1;
  std::mt19937 rng(::getpid());
  for (int r = 0; r < rounds; ++r) {
    int id = static_cast<int>(rng() % writers), i = static_cast<int>(rng() % count);
    auto got = store->get(worker_key(id, i));
    if (!got) return die("get: " + got.error().message);
    if (*got && (*got)->outputs.at(0).data != worker_entry(id, i, size).outputs[0].data)
      return die("wrong bytes");
  }
  return 0;
}

int hammer_mode(const std::string& dir, size_t size) {
  auto store = open_or_null(dir);
  if (!store) return 1;
  for (int i = 0;; ++i) {
    if (auto r = store->put(worker_key(99, i), worker_entry(99, i, size)); !r)
      return die("put: " + r.error().message);
    std::printf("committed %d\n", i);
    std::fflush(stdout);
  }
}

int probe_mode(const std::string& dir, const std::string& how) {
  auto store = open_or_null(dir);
  if (!store) return 1;
  if (auto r = store->put(worker_key(7, 0), worker_entry(7, 0, 2048)); !r)
    return die("put: " + r.error().message);
  uint64_t map = store->stats()->map_size;  // stats() flushes: before the touch
  if (how == "touch") {
    auto got = store->get(worker_key(7, 0));
    if (!got || !*got) return die("get after put failed");
  }
  std::printf("map %llu\n", static_cast<unsigned long long>(map));
  std::fflush(stdout);
  char line[16];
  if (!std::fgets(line, sizeof line, stdin)) return die("stdin closed before the go");
  int i = how == "touch" ? 1 : 2;
  Digest key = worker_key(7, how == "touch" ? 1 : 0);
  auto r = store->put(key, worker_entry(7, i, 2048));
  std::printf("%s\n", r ? "put ok" : ("put failed: " + r.error().message).c_str());
  std::fflush(stdout);
  return r ? 0 : 1;
}

// The next page number of the committed data (what a new transaction allocates first).
uint64_t next_page(lmdb::Env& env) {
  return env.info().map_used / 4096;
}

int fill_mode(const std::string& dir, uint64_t pages) {
  std::unique_ptr<lmdb::Env> env;
  std::unique_ptr<lmdb::Txn> pin;
  if (int status = open_with_reader(dir, 64ull << 20, env, pin); status != 0) return status;
  // Aim at pages - 1: a transaction of one small value costs `small` pages
  // (copied branch and leaf pages, the freelist record); a value of n pages
  // more goes to n overflow pages.
  uint64_t small = 3;
  for (int i = 0;; ++i) {
    uint64_t now = next_page(*env);
    if (now + 2 >= pages) break;
    uint64_t gap = pages - 1 - now;
    uint64_t overflow = gap > small + 1 ? gap - small : 0;
    std::string value(overflow ? overflow * 4096 - 64 : 8, 'f');
    if (int rc = commit_one(*env, "fill-" + std::to_string(i), value); rc != 0)
      return die("fill: " + lmdb::rc_text(rc));
    if (!overflow) small = next_page(*env) - now;
  }
  uint64_t filled = next_page(*env);
  std::printf("filled %llu\n", static_cast<unsigned long long>(filled));
  std::fflush(stdout);
  wait_for_stdin_to_close();
  return filled > pages ? 3 : 0;
}

// Commits one small value per transaction with a 64 MiB map, holding a read
// transaction (so no freed page is reused), until the file STOP exists or
// after 2000 (about 24 MiB: the map never fills): the data grows a few pages
// at a time past the smaller maps of other processes.
int creep_mode(const std::string& dir, const std::string& stop) {
  std::unique_ptr<lmdb::Env> env;
  std::unique_ptr<lmdb::Txn> pin;
  if (int status = open_with_reader(dir, 64ull << 20, env, pin); status != 0) return status;
  for (int i = 0; i < 2000 && ::access(stop.c_str(), F_OK) != 0; ++i) {
    if (int rc = commit_one(*env, "creep-" + std::to_string(i), "c"); rc != 0)
      return die("creep: " + lmdb::rc_text(rc));
  }
  return 0;
}

int hold_mode(const std::string& dir) {
  std::unique_ptr<lmdb::Env> env;
  std::unique_ptr<lmdb::Txn> txn;
  if (int status = open_with_reader(dir, 1 << 20, env, txn); status != 0) return status;
  std::printf("reading\n");
  std::fflush(stdout);
  wait_for_stdin_to_close();
  return 0;
}

int grow_mode(const std::string& dir) {
  std::unique_ptr<lmdb::Env> env;
  if (int rc = lmdb::Env::open(dir, 256 * 1024, env); rc != 0)
    return die("open: " + lmdb::rc_text(rc));
  char line[32];
  for (int i = 0; std::fgets(line, sizeof line, stdin);) {
    uint64_t target = std::strtoull(line, nullptr, 10);
    if (int rc = env->set_map_size(2 * target); rc != 0)
      return die("set map: " + lmdb::rc_text(rc));
    while (env->info().map_used <= target) {
      if (int rc = commit_one(*env, "grow-" + std::to_string(i++), std::string(64 * 1024, 'g'));
          rc != 0)
        return die("grow: " + lmdb::rc_text(rc));
    }
    std::printf("grown %llu\n", static_cast<unsigned long long>(env->info().map_used));
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 2 ? argv[1] : "";
  if (mode == "write" && argc == 6)
    return write_mode(argv[2], std::atoi(argv[3]), std::atoi(argv[4]), std::atoll(argv[5]));
  if (mode == "read" && argc == 7) {
    return read_mode(argv[2], std::atoi(argv[3]), std::atoi(argv[4]), std::atoll(argv[5]),
                     std::atoi(argv[6]));
  }
  if (mode == "hammer" && argc == 4) return hammer_mode(argv[2], std::atoll(argv[3]));
  if (mode == "hold" && argc == 3) return hold_mode(argv[2]);
  if (mode == "grow" && argc == 3) return grow_mode(argv[2]);
  if (mode == "creep" && argc == 4) return creep_mode(argv[2], argv[3]);
  if (mode == "probe" && argc == 4) return probe_mode(argv[2], argv[3]);
  if (mode == "fill" && argc == 4) return fill_mode(argv[2], std::strtoull(argv[3], nullptr, 10));
  std::fprintf(stderr,
               "usage: cache_store_worker write|read|hammer|creep|probe|fill|grow|hold DIR ...\n");
  return 2;
}
