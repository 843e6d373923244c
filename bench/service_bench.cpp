// Service benchmarks (issue 3): ping round trip, a 16 KiB cache hit over a
// persistent connection (the service's own work plus one socket round trip),
// a whole `ccpool exec` process served a hit, and hit throughput with 1, 8
// and 64 concurrent connections. Starts its own `ccpool serve --foreground`.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "base/fs.h"
#include "ipc/client.h"

extern char** environ;

namespace {

using ccpool::ipc::Client;
using ccpool::ipc::deadline_in;

struct Service {
  std::string dir, socket, input, output;
  pid_t pid = 0;

  Service() {
    dir = *ccpool::make_temp_dir("/tmp", "ccpool-service-bench.");
    socket = dir + "/run/sock";
    input = dir + "/in.bin";
    output = dir + "/out.bin";
    std::string data(16 * 1024, '\0');
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131 + 7);
    (void)ccpool::write_file_atomic(input, data, 0644);
    std::string bin = std::string(CCPOOL_BIN_DIR) + "/ccpool";
    std::vector<std::string> args = {bin,        "serve", "--foreground", "--no-resp",
                                     "--socket", socket,  "--dir",        dir + "/store"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    posix_spawn(&pid, bin.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    for (int i = 0; i < 200; ++i) {
      if (Client::connect(socket, deadline_in(std::chrono::milliseconds(100)))) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
  }
  ~Service() {
    ::kill(pid, SIGTERM);
    ::waitpid(pid, nullptr, 0);
    ccpool::remove_tree(dir);
  }

  // A declared job: cp of a 16 KiB input; cached after its first run.
  ccpool::ipc::ExecRequest request() const {
    ccpool::ipc::ExecRequest req;
    req.program = "/bin/cp";
    req.argv = {"cp", input, output};
    req.cwd = dir;
    req.env = {"PATH=/usr/bin:/bin", "LANG=C"};
    req.client_pid = ::getpid();
    req.inputs = {input};
    req.outputs = {output};
    return req;
  }
};

Service& service() {
  static Service* s = new Service;  // one per benchmark process, stopped at exit
  static bool registered = (std::atexit([] { delete s; }), true);
  (void)registered;
  return *s;
}

Client connect() {
  auto c = Client::connect(service().socket, deadline_in(std::chrono::seconds(5)));
  if (!c) std::abort();
  return std::move(*c);
}

void BM_Ping(benchmark::State& state) {
  Client c = connect();
  for (auto _ : state) {
    if (!c.ping(deadline_in(std::chrono::seconds(5)))) state.SkipWithError("ping failed");
  }
}
BENCHMARK(BM_Ping)->UseRealTime();

void BM_Hit16KiB(benchmark::State& state) {
  Client c = connect();
  auto req = service().request();
  (void)c.exec(req, deadline_in(std::chrono::seconds(30)));  // miss: fills the store
  for (auto _ : state) {
    auto reply = c.exec(req, deadline_in(std::chrono::seconds(30)));
    if (!reply || reply->outcome != ccpool::ipc::CacheOutcome::kHit)
      state.SkipWithError("not a hit");
  }
  state.SetBytesProcessed(state.iterations() * 16 * 1024);
}
BENCHMARK(BM_Hit16KiB)->UseRealTime();

void BM_HitThroughput(benchmark::State& state) {
  const int clients = static_cast<int>(state.range(0));
  auto req = service().request();
  {
    Client warm = connect();
    (void)warm.exec(req, deadline_in(std::chrono::seconds(30)));
  }
  constexpr int kPerClient = 200;
  for (auto _ : state) {
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    for (int t = 0; t < clients; ++t) {
      threads.emplace_back([&, t] {
        Client c = connect();
        auto mine = req;
        mine.outputs = {service().dir + "/out." + std::to_string(t)};
        mine.argv = {"cp", service().input, mine.outputs[0]};
        (void)c.exec(mine, deadline_in(std::chrono::seconds(30)));  // each client's own key
        for (int i = 0; i < kPerClient; ++i) {
          auto r = c.exec(mine, deadline_in(std::chrono::seconds(30)));
          if (!r || r->outcome != ccpool::ipc::CacheOutcome::kHit) ++failures;
        }
      });
    }
    for (auto& t : threads) t.join();
    if (failures) state.SkipWithError("a request was not a hit");
  }
  state.SetItemsProcessed(state.iterations() * clients * kPerClient);
}
BENCHMARK(BM_HitThroughput)->Arg(1)->Arg(8)->Arg(64)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_ExecProcessHit(benchmark::State& state) {
  auto req = service().request();
  {
    Client warm = connect();
    (void)warm.exec(req, deadline_in(std::chrono::seconds(30)));
  }
  std::string bin = std::string(CCPOOL_BIN_DIR) + "/ccpool";
  std::vector<std::string> args = {bin,       "exec",          "--socket",      service().socket,
                                   "--input", service().input, "--output",      service().output,
                                   "--",      "/bin/cp",       service().input, service().output};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string sock_env = "CCPOOL_SOCKET=" + service().socket;
  std::vector<char*> env = {sock_env.data(), const_cast<char*>("CCPOOL_NO_AUTOSTART=1"),
                            const_cast<char*>("PATH=/usr/bin:/bin"), const_cast<char*>("LANG=C"),
                            nullptr};
  for (auto _ : state) {
    pid_t pid;
    posix_spawn(&pid, bin.c_str(), nullptr, nullptr, argv.data(), env.data());
    int status;
    ::waitpid(pid, &status, 0);
    if (status != 0) state.SkipWithError("exec failed");
  }
}
// A whole `ccpool exec --input/--output` process (start, connect, hit, write, exit).
BENCHMARK(BM_ExecProcessHit)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
