// cache_store_worker: a child process for the multi-process store tests.
//   write DIR ID COUNT SIZE   put COUNT entries "w<ID>-<i>", re-reading each
//   read DIR WRITERS COUNT SIZE ROUNDS  get random writer keys; any found must be byte-exact
//   hammer DIR SIZE           put entries forever, printing "committed <i>" after each
// Exits 0 on success, 1 on any store error or wrong bytes (message on stderr).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

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

int write_mode(const std::string& dir, int id, int count, size_t size) {
  auto store = open_or_null(dir);
  if (!store) return 1;
  for (int i = 0; i < count; ++i) {
    Entry e = worker_entry(id, i, size);
    if (auto r = store->put(worker_key(id, i), e); !r) return die("put: " + r.error().message);
    auto got = store->get(worker_key(id, i));
    if (!got || !*got || (*got)->outputs.at(0).data != e.outputs[0].data) return die("read-back mismatch");
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
    if (*got && (*got)->outputs.at(0).data != worker_entry(id, i, size).outputs[0].data) return die("wrong bytes");
  }
  return 0;
}

int hammer_mode(const std::string& dir, size_t size) {
  auto store = open_or_null(dir);
  if (!store) return 1;
  for (int i = 0;; ++i) {
    if (auto r = store->put(worker_key(99, i), worker_entry(99, i, size)); !r) return die("put: " + r.error().message);
    std::printf("committed %d\n", i);
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 2 ? argv[1] : "";
  if (mode == "write" && argc == 6) return write_mode(argv[2], std::atoi(argv[3]), std::atoi(argv[4]), std::atoll(argv[5]));
  if (mode == "read" && argc == 7) {
    return read_mode(argv[2], std::atoi(argv[3]), std::atoi(argv[4]), std::atoll(argv[5]), std::atoi(argv[6]));
  }
  if (mode == "hammer" && argc == 4) return hammer_mode(argv[2], std::atoll(argv[3]));
  std::fprintf(stderr, "usage: cache_store_worker write|read|hammer DIR ...\n");
  return 2;
}
