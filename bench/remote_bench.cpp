// Remote tier read latency over loopback against a redis-server this program
// starts itself (same harness as the tests). Sweeps the value size; the
// issue's reference point is 16 KiB.
//   build-remote/bin/remote_bench --benchmark_filter=Remote
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "base/fs.h"
#include "remote/tier.h"
#include "tests/remote/redis_server.h"

namespace {

using ccpool::remote::RemoteOptions;
using ccpool::remote::Tier;

struct Fixture {
  std::string dir;
  std::unique_ptr<ccpool::testing::RedisServer> server;
};

Fixture* fixture() {
  static Fixture* f = [] {
    auto* fx = new Fixture;
    auto dir = ccpool::make_temp_dir("/tmp", "ccpool-remote-bench.");
    if (!dir) return fx;
    fx->dir = *dir;
    auto server = ccpool::testing::RedisServer::start(fx->dir);
    if (server) fx->server = std::move(*server);
    return fx;
  }();
  return f;
}

void run_get(benchmark::State& state, bool sign) {
  Fixture* fx = fixture();
  if (!fx->server) {
    state.SkipWithError("redis-server could not be started (is /usr/bin/redis-server installed?)");
    return;
  }
  RemoteOptions o;
  o.url = fx->server->url();
  if (sign) {
    std::string key_file = fx->dir + "/hmac.key";
    (void)ccpool::write_file_atomic(key_file, "benchmark-secret-of-32-bytes-abc", 0600);
    o.hmac_key_file = key_file;
  }
  auto tier = Tier::create(o);
  if (!tier) {
    state.SkipWithError(tier.error().message.c_str());
    return;
  }
  auto size = static_cast<size_t>(state.range(0));
  ccpool::Digest key = ccpool::hash_bytes("bench-" + std::to_string(size) + (sign ? "s" : "u"));
  (*tier)->put_async(key, std::string(size, 'v'));
  (*tier)->flush_for_testing();
  for (auto _ : state) {
    auto value = (*tier)->get(key);
    if (!value || value->size() != size) {
      state.SkipWithError("remote get failed");
      break;
    }
    benchmark::DoNotOptimize(value->data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
}

void BM_RemoteGet(benchmark::State& state) {
  run_get(state, false);
}
void BM_RemoteGetSigned(benchmark::State& state) {
  run_get(state, true);
}

BENCHMARK(BM_RemoteGet)->Arg(1 << 10)->Arg(16 << 10)->Arg(256 << 10)->Arg(4 << 20);
BENCHMARK(BM_RemoteGetSigned)->Arg(16 << 10)->Arg(4 << 20);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  Fixture* fx = fixture();
  fx->server.reset();  // SIGKILL + reap before removing its directory
  if (!fx->dir.empty()) ccpool::remove_tree(fx->dir);
  return 0;
}
