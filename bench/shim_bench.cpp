// Cost of libccpool-shim.so on non-compiler execs: posix_spawn + waitpid of
// /bin/true through
//   Libc            libc's posix_spawn, no LD_PRELOAD (baseline)
//   ShimHook        the shim's posix_spawn hook (dlopen'ed), child not preloaded
//   ShimPreloaded   the hook, and the child runs with LD_PRELOAD=shim, as every
//                   exec under `ccpool run` does (child pays the shim's constructor)
// plus the hook's decision alone (execve of a missing non-compiler path).
// Target: ShimPreloaded - Libc <= 5 us per exec.
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

extern char** environ;

namespace {

using SpawnFn = int (*)(pid_t*, const char*, const posix_spawn_file_actions_t*,
                        const posix_spawnattr_t*, char* const[], char* const[]);
using ExecveFn = int (*)(const char*, char* const[], char* const[]);

const std::string kShim = std::string(CCPOOL_BIN_DIR) + "/../lib/libccpool-shim.so";

void* shim_handle() {
  static void* handle = dlopen(kShim.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    std::fprintf(stderr, "shim_bench: cannot load %s: %s\n", kShim.c_str(), dlerror());
    std::exit(1);
  }
  return handle;
}

void spawn_loop(benchmark::State& state, SpawnFn spawn, bool preload) {
  std::string preload_var = "LD_PRELOAD=" + kShim;
  char* envp[] = {const_cast<char*>("PATH=/usr/bin:/bin"), preload ? preload_var.data() : nullptr,
                  nullptr};
  char* argv[] = {const_cast<char*>("true"), nullptr};
  for (auto _ : state) {
    pid_t pid;
    if (spawn(&pid, "/bin/true", nullptr, nullptr, argv, envp) != 0) {
      state.SkipWithError("posix_spawn failed");
      break;
    }
    int status;
    waitpid(pid, &status, 0);
  }
}

void BM_SpawnTrue_Libc(benchmark::State& state) {
  spawn_loop(state, &posix_spawn, false);
}
void BM_SpawnTrue_ShimHook(benchmark::State& state) {
  spawn_loop(state, reinterpret_cast<SpawnFn>(dlsym(shim_handle(), "posix_spawn")), false);
}
void BM_SpawnTrue_ShimPreloaded(benchmark::State& state) {
  spawn_loop(state, reinterpret_cast<SpawnFn>(dlsym(shim_handle(), "posix_spawn")), true);
}

// The hook's own work on a non-compiler: a failing execve costs one syscall,
// so the difference between these two is the hook's decision.
void exec_missing(benchmark::State& state, ExecveFn exec) {
  char* argv[] = {const_cast<char*>("python3"), const_cast<char*>("train.py"), nullptr};
  for (auto _ : state) benchmark::DoNotOptimize(exec("/nonexistent/python3", argv, environ));
}
void BM_ExecveMissing_Libc(benchmark::State& state) {
  exec_missing(state, &execve);
}
void BM_ExecveMissing_ShimHook(benchmark::State& state) {
  exec_missing(state, reinterpret_cast<ExecveFn>(dlsym(shim_handle(), "execve")));
}

BENCHMARK(BM_SpawnTrue_Libc)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SpawnTrue_ShimHook)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SpawnTrue_ShimPreloaded)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ExecveMissing_Libc)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_ExecveMissing_ShimHook)->Unit(benchmark::kNanosecond);

}  // namespace

BENCHMARK_MAIN();
