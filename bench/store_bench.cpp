// Store throughput: put and get (decompress + XXH3 verify) of 1 KiB .. 16 MiB
// outputs cut from real object code, and the compression ratio on whole
// archives of object files. Data: $CCPOOL_BENCH_OBJECTS (a .a or .o file),
// else libstdc++.a / libc.a. Store: a fresh temp dir under /tmp.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "base/fs.h"
#include "base/process_facts.h"
#include "cache/store.h"

namespace {

using namespace ccpool;
using namespace ccpool::cache;

const std::string& object_code() {
  static const std::string* data = [] {
    std::string env = own_env("CCPOOL_BENCH_OBJECTS").value_or("");
    for (const char* path : {env.c_str(), "/usr/lib/gcc/x86_64-linux-gnu/12/libstdc++.a",
                             "/usr/lib/x86_64-linux-gnu/libc.a"}) {
      if (!*path) continue;
      if (auto bytes = read_file(path); bytes && bytes->size() > (1u << 20))
        return new std::string(std::move(*bytes));
    }
    return new std::string(32u << 20, 'x');
  }();
  return *data;
}

// A slice of object code of `size` bytes starting at a position chosen by `seed`.
std::string slice(size_t size, uint64_t seed) {
  const std::string& all = object_code();
  std::string out;
  size_t pos = (seed * 7919 * 4096) % all.size();
  while (out.size() < size) {
    size_t n = std::min(size - out.size(), all.size() - pos);
    out.append(all, pos, n);
    pos = 0;
  }
  return out;
}

struct BenchStore {
  std::string dir;
  std::unique_ptr<Store> store;
  BenchStore() {
    dir = *make_temp_dir("/tmp", "ccpool-store-bench.");
    StoreOptions o;
    o.dir = dir;
    o.max_size = 8ull << 30;
    store = std::move(*Store::open(o));
  }
  ~BenchStore() {
    store.reset();
    remove_tree(dir);
  }
};

Entry entry_of(std::string data) {
  Entry e;
  e.tool = "bench";
  e.outputs.push_back({"out.o", 0644, 0, {}, std::move(data)});
  return e;
}

void BM_Put(benchmark::State& state) {
  BenchStore b;
  size_t size = static_cast<size_t>(state.range(0));
  std::vector<Entry> entries;
  for (int i = 0; i < 8; ++i) entries.push_back(entry_of(slice(size, i)));
  uint64_t n = 0;
  for (auto _ : state) {
    // Distinct keys; bodies cycle through 8 slices so large sizes stay within RAM.
    auto r = b.store->put(hash_bytes("k" + std::to_string(n)), entries[n % 8]);
    if (!r) state.SkipWithError(r.error().message.c_str());
    ++n;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
}

void BM_Get(benchmark::State& state) {
  BenchStore b;
  size_t size = static_cast<size_t>(state.range(0));
  Digest key = hash_bytes("get");
  if (!b.store->put(key, entry_of(slice(size, 3)))) state.SkipWithError("put failed");
  for (auto _ : state) {
    auto r = b.store->get(key);
    if (!r || !*r) state.SkipWithError("get missed");
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
}

// Stores the object code as 64 KiB outputs and reports stored/raw.
void BM_CompressionRatio(benchmark::State& state) {
  const std::string& all = object_code();
  for (auto _ : state) {
    BenchStore b;
    size_t chunk = 64 * 1024, i = 0;
    for (size_t pos = 0; pos < all.size(); pos += chunk, ++i) {
      (void)b.store->put(hash_bytes("c" + std::to_string(i)), entry_of(all.substr(pos, chunk)));
    }
    auto s = b.store->stats();
    state.counters["raw_MiB"] = static_cast<double>(s->logical_bytes) / (1 << 20);
    state.counters["stored_MiB"] = static_cast<double>(s->stored_bytes) / (1 << 20);
    state.counters["ratio"] =
        static_cast<double>(s->logical_bytes) / static_cast<double>(s->stored_bytes);
  }
}

}  // namespace

BENCHMARK(BM_Put)->Arg(1 << 10)->Arg(64 << 10)->Arg(1 << 20)->Arg(16 << 20)->Unit(
    benchmark::kMicrosecond);
BENCHMARK(BM_Get)->Arg(1 << 10)->Arg(64 << 10)->Arg(1 << 20)->Arg(16 << 20)->Unit(
    benchmark::kMicrosecond);
BENCHMARK(BM_CompressionRatio)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
