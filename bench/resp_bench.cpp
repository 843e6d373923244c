// RESP front throughput: GET of a value (16 KiB by default) over the front's
// Unix socket and loopback TCP, one request at a time and pipelined; and the
// parser alone. Reports bytes/s of value payload.
//   build-x/bin/resp_bench --benchmark_filter=Get
#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>

#include "base/fs.h"
#include "resp/front.h"

namespace {

using ccpool::UniqueFd;
using ccpool::resp::Front;
using ccpool::resp::FrontOptions;
using ccpool::resp::InMemoryKv;

std::string get_command(const std::string& key) {
  return "*2\r\n$3\r\nGET\r\n$" + std::to_string(key.size()) + "\r\n" + key + "\r\n";
}

// A Front over an InMemoryKv holding one value of `size` bytes under "k".
struct Server {
  explicit Server(size_t size) {
    dir = *ccpool::make_temp_dir("/tmp", "resp-bench.");
    FrontOptions options;
    options.unix_path = dir + "/resp.sock";
    options.tcp_port = -1;
    kv.set("k", std::string(size, 'v'), 0);
    front = std::move(*Front::start(options, kv));
  }
  ~Server() {
    front.reset();
    ccpool::remove_tree(dir);
  }
  UniqueFd connect(bool tcp) const {
    if (tcp) {
      UniqueFd fd(socket(AF_INET, SOCK_STREAM, 0));
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(static_cast<uint16_t>(front->tcp_port()));
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      int one = 1;
      setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0)
        return UniqueFd();
      return fd;
    }
    UniqueFd fd(socket(AF_UNIX, SOCK_STREAM, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, front->unix_path().c_str(), sizeof(addr.sun_path) - 1);
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0)
      return UniqueFd();
    return fd;
  }

  std::string dir;
  InMemoryKv kv;
  std::unique_ptr<Front> front;
};

bool read_n(int fd, char* buffer, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = recv(fd, buffer + got, n - got, 0);
    if (r <= 0) return false;
    got += static_cast<size_t>(r);
  }
  return true;
}

// Args: value size, pipeline depth, 1 = TCP / 0 = Unix socket.
void BM_Get(benchmark::State& state) {
  size_t size = static_cast<size_t>(state.range(0));
  int depth = static_cast<int>(state.range(1));
  Server server(size);
  UniqueFd fd = server.connect(state.range(2) == 1);
  std::string request;
  for (int i = 0; i < depth; ++i) request += get_command("k");
  size_t reply_size = (std::to_string(size).size() + 5 + size) * static_cast<size_t>(depth);
  std::unique_ptr<char[]> buffer(new char[reply_size]);
  for (auto _ : state) {
    if (ccpool::write_all(fd.get(), request) && read_n(fd.get(), buffer.get(), reply_size))
      continue;
    state.SkipWithError("connection failed");
    break;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * depth *
                          static_cast<int64_t>(size));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * depth);
}
BENCHMARK(BM_Get)
    ->ArgNames({"size", "depth", "tcp"})
    ->Args({16 << 10, 1, 0})
    ->Args({16 << 10, 16, 0})
    ->Args({16 << 10, 64, 0})
    ->Args({16 << 10, 1, 1})
    ->Args({16 << 10, 16, 1})
    ->Args({16 << 10, 64, 1})
    ->Args({1 << 20, 1, 0})
    ->Args({64, 64, 0})
    ->UseRealTime();  // the server works on its own thread: client CPU time would flatter it

// The parser alone: a pipelined batch of SETs of `size`-byte values.
void BM_ParseSet(benchmark::State& state) {
  size_t size = static_cast<size_t>(state.range(0));
  std::string value(size, 'v');
  std::string one =
      "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$" + std::to_string(size) + "\r\n" + value + "\r\n";
  std::string batch;
  for (int i = 0; i < 64; ++i) batch += one;
  for (auto _ : state) {
    ccpool::resp::RespParser parser(256u << 20, 1024 * 1024);
    parser.feed(batch);
    int commands = 0;
    while (true) {
      auto next = parser.next();
      if (!next || !*next) break;
      ++commands;
    }
    benchmark::DoNotOptimize(commands);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(batch.size()));
}
BENCHMARK(BM_ParseSet)->Arg(64)->Arg(16 << 10)->Arg(1 << 20);

}  // namespace

BENCHMARK_MAIN();
