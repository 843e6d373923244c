// ipc and client benchmarks:
//   BM_EncodeExecRequest / BM_DecodeExecRequest: an ExecRequest with N args
//     and a 4 KiB environment (bytes/s).
//   BM_PingRoundTrip: ping -> pong over a socketpair with an echo thread.
//   BM_ClientProcessHit / BM_SpawnTrue: a whole `ccpool-client` process served
//     a 16 KiB "hit" by an in-process fake service, against exec'ing /bin/true;
//     child_cpu_us is the CPU the child process itself used per run.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

#include "base/fs.h"
#include "ipc/protocol.h"
#include "ipc/socket.h"

namespace {

using namespace ccpool;
using std::chrono::milliseconds;

ipc::ExecRequest make_request(int args) {
  ipc::ExecRequest r;
  r.program = "/usr/bin/g++";
  r.cwd = "/tmp/torchinductor_user/ab";
  for (int i = 0; i < args; ++i) r.argv.push_back("-DKERNEL_PARAM_" + std::to_string(i) + "=1");
  size_t env_bytes = 0;
  for (int i = 0; env_bytes < 4096; ++i) {
    r.env.push_back("VARIABLE_" + std::to_string(i) + "=" + std::string(40, 'v'));
    env_bytes += r.env.back().size();
  }
  r.outputs = {"k.so"};
  return r;
}

void BM_EncodeExecRequest(benchmark::State& state) {
  ipc::Message m = make_request(static_cast<int>(state.range(0)));
  size_t bytes = 0;
  for (auto _ : state) {
    std::string frame = ipc::encode(m);
    bytes += frame.size();
    benchmark::DoNotOptimize(frame);
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}
BENCHMARK(BM_EncodeExecRequest)->Arg(10)->Arg(100)->Arg(1000);

void BM_DecodeExecRequest(benchmark::State& state) {
  std::string frame = ipc::encode(make_request(static_cast<int>(state.range(0))));
  for (auto _ : state) {
    ipc::FrameReader reader;
    reader.feed(frame.data(), frame.size());
    auto m = reader.next();
    if (!m || !*m) state.SkipWithError("decode failed");
    benchmark::DoNotOptimize(m);
  }
  state.SetBytesProcessed(static_cast<int64_t>(frame.size() * state.iterations()));
}
BENCHMARK(BM_DecodeExecRequest)->Arg(10)->Arg(100)->Arg(1000);

void BM_PingRoundTrip(benchmark::State& state) {
  int fds[2];
  ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds);
  UniqueFd ours(fds[0]), theirs(fds[1]);
  std::thread echo([fd = theirs.get()] {
    ipc::FrameReader reader;
    for (;;) {
      auto m = ipc::recv_message(fd, reader, ipc::deadline_in(milliseconds(60000)));
      if (!m) return;
      if (!ipc::send_message(fd, ipc::Pong{}, ipc::deadline_in(milliseconds(60000)))) return;
    }
  });
  ipc::FrameReader reader;
  for (auto _ : state) {
    auto deadline = ipc::deadline_in(milliseconds(10000));
    if (!ipc::send_message(ours.get(), ipc::Ping{}, deadline)) state.SkipWithError("send failed");
    auto m = ipc::recv_message(ours.get(), reader, deadline);
    if (!m) state.SkipWithError("recv failed");
  }
  ::shutdown(ours.get(), SHUT_RDWR);
  echo.join();
}
BENCHMARK(BM_PingRoundTrip)->UseRealTime();

// CPU seconds (user + system) used by reaped children so far: the child's own
// work, independent of how loaded the machine's run queue is.
double children_cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_CHILDREN, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
}

void report_child_cpu(benchmark::State& state, double before) {
  state.counters["child_cpu_us"] = benchmark::Counter((children_cpu_seconds() - before) * 1e6 /
                                                      static_cast<double>(state.iterations()));
}

int spawn_and_wait(const char* const* argv, char* const* envp) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int null_fd = ::open("/dev/null", O_WRONLY);
    ::dup2(null_fd, 1);
    ::execve(argv[0], const_cast<char* const*>(argv), envp);
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

void BM_ClientProcessHit(benchmark::State& state) {
  std::string dir = "/tmp/ccpool-ipc-bench-" + std::to_string(::getpid());
  (void)ensure_private_dir(dir);
  std::string socket = dir + "/sock";
  auto listener = ipc::listen_unix(socket);
  if (!listener) return state.SkipWithError(listener.error().message.c_str());
  int listen_fd = listener->get();
  std::thread service([listen_fd] {
    ipc::ExecReply hit;
    hit.stdout_data.assign(16 * 1024, 'o');
    hit.outcome = ipc::CacheOutcome::kHit;
    for (;;) {
      pollfd p{listen_fd, POLLIN, 0};
      if (::poll(&p, 1, 60000) != 1 || (p.revents & (POLLHUP | POLLERR | POLLNVAL))) return;
      UniqueFd conn(::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC));
      if (!conn) return;
      ipc::FrameReader reader;
      auto deadline = ipc::deadline_in(milliseconds(10000));
      if (!ipc::recv_message(conn.get(), reader, deadline)) continue;
      (void)ipc::send_message(conn.get(), ipc::HelloOk{}, deadline);
      if (!ipc::recv_message(conn.get(), reader, deadline)) continue;
      (void)ipc::send_message(conn.get(), hit, deadline);
    }
  });
  std::string client = std::string(CCPOOL_BIN_DIR) + "/ccpool-client";
  const char* argv[] = {client.c_str(), "/usr/bin/g++", "g++", "-c", "k.cpp", nullptr};
  std::string socket_env = "CCPOOL_SOCKET=" + socket;
  char* envp[] = {const_cast<char*>(socket_env.c_str()), const_cast<char*>("CCPOOL_NO_AUTOSTART=1"),
                  const_cast<char*>("PATH=/usr/bin:/bin"), nullptr};
  double cpu_before = children_cpu_seconds();
  for (auto _ : state) {
    if (spawn_and_wait(argv, envp) != 0) state.SkipWithError("ccpool-client failed");
  }
  report_child_cpu(state, cpu_before);
  ::shutdown(listen_fd, SHUT_RDWR);
  service.join();
  listener->reset();
  remove_tree(dir);
}
BENCHMARK(BM_ClientProcessHit)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_SpawnTrue(benchmark::State& state) {
  const char* argv[] = {"/bin/true", nullptr};
  char* envp[] = {nullptr};
  double cpu_before = children_cpu_seconds();
  for (auto _ : state) spawn_and_wait(argv, envp);
  report_child_cpu(state, cpu_before);
}
BENCHMARK(BM_SpawnTrue)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
