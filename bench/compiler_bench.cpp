// Compiler-model overheads: plan()+lookup() for a kernel including 200 headers
// (manifest validation, the per-request cost of a hit), and plan()+conclude()
// (the miss overhead on top of the compile itself).
#include <benchmark/benchmark.h>
#include <unistd.h>

extern char** environ;

#include <filesystem>
#include <fstream>
#include <map>

#include "base/fs.h"
#include "compiler/planner.h"
#include "compiler/subprocess.h"

namespace {

using namespace ccpool;
using namespace ccpool::compiler;

struct Fixture {
  std::string dir;
  Request request;
  std::map<Digest, std::string> manifests;
  ManifestStorage storage;

  // std_headers: also include what an Inductor C++ kernel includes (the
  // standard library and <omp.h>: ~150 system headers behind a dozen search
  // directories) and add -fopenmp.
  explicit Fixture(int headers, bool std_headers = false) {
    dir = *make_temp_dir("/tmp", "ccpool-compiler-bench.");
    std::filesystem::create_directories(dir + "/inc");
    std::ofstream src(dir + "/k.cpp");
    if (std_headers) {
      for (const char* h : {"algorithm", "cmath", "cstdint", "functional", "map", "numeric",
                            "string", "vector", "omp.h"}) {
        src << "#include <" << h << ">\n";
      }
    }
    for (int i = 0; i < headers; ++i) {
      std::ofstream(dir + "/inc/h" + std::to_string(i) + ".h")
          << "inline int f" << i << "() { return " << i << "; }\n";
      src << "#include \"h" << i << ".h\"\n";
    }
    src << "extern \"C\" int kernel() { return 1; }\n";
    src.close();
    sleep(3);  // let the files age past the stat-memo's racy window
    request.program = "/usr/bin/g++";
    request.argv = {"g++", "k.cpp", "-O2", "-shared", "-fPIC", "-Iinc", "-o", "k.so"};
    if (std_headers) request.argv.push_back("-fopenmp");
    request.cwd = dir;
    request.env = {"PATH=/usr/bin:/bin"};
    storage.load = [this](const Digest& k) -> std::optional<std::string> {
      auto it = manifests.find(k);
      return it == manifests.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
    storage.save = [this](const Digest& k, const std::string& v) { manifests[k] = v; };
  }
  ~Fixture() { remove_tree(dir); }

  // One real run of `plan` as the service runs it (the record file created
  // empty first); returns what conclude() needs.
  RunFacts run(const Plan& plan) {
    std::filesystem::create_directories(dir + "/work");
    if (!plan.trace_path.empty()) std::ofstream(plan.trace_path).close();
    RunFacts facts;
    facts.started = std::chrono::system_clock::now() - std::chrono::seconds(1);
    Result<HelperOutput> ran = run_helper(plan.run_argv, plan.run_env, plan.run_cwd,
                                          std::chrono::seconds(120), plan.run_program);
    facts.success = ran && ran->exit_code == 0;
    for (const OutputSpec& out : plan.outputs) {
      std::ifstream in(out.run_path, std::ios::binary);
      if (!in) continue;
      facts.outputs.emplace_back(out.name, std::string(std::istreambuf_iterator<char>(in), {}));
    }
    return facts;
  }

  // One real miss: run the plan, conclude, and keep the manifest entry as
  // the service would.
  void prime(Planner& planner) {
    Plan plan = *planner.plan(request, dir + "/work");
    Conclusion done = planner.conclude(plan, run(plan), storage);
    if (done.finished.store && done.manifest) manifests[plan.flight_key] = *done.manifest;
    remove_tree(dir + "/work");
  }
};

// The timed part of every hit benchmark: plan() and lookup() of f's request,
// which must hit.
void time_hits(benchmark::State& state, Fixture& f, Planner& planner) {
  for (auto _ : state) {
    Plan plan = *planner.plan(f.request, f.dir + "/work");
    auto key = planner.lookup(plan, f.storage);
    if (!key || !*key) state.SkipWithError("expected a manifest hit");
    benchmark::DoNotOptimize(key);
  }
}

void BM_PlanAndLookupHit(benchmark::State& state) {
  Fixture f(static_cast<int>(state.range(0)));
  Planner planner;
  f.prime(planner);
  time_hits(state, f, planner);
  state.SetLabel("headers=" + std::to_string(state.range(0)));
}
BENCHMARK(BM_PlanAndLookupHit)->Arg(20)->Arg(200)->Unit(benchmark::kMicrosecond);

// The kernel of scripts/lib/gen_kernels.py: standard headers, -fopenmp, plus
// `range(0)` user headers. Reports the stored manifest size.
void BM_PlanAndLookupHitStdHeaders(benchmark::State& state) {
  Fixture f(static_cast<int>(state.range(0)), true);
  Planner planner;
  f.prime(planner);
  time_hits(state, f, planner);
  size_t bytes = 0;
  for (const auto& [k, v] : f.manifests) bytes += v.size();
  state.counters["manifest_bytes"] = static_cast<double>(bytes);
  state.SetLabel("std headers + " + std::to_string(state.range(0)));
}
BENCHMARK(BM_PlanAndLookupHitStdHeaders)->Arg(0)->Arg(200)->Unit(benchmark::kMicrosecond);

// Workload b's request on the service's side: a one-line TU compiled with
// -c, the caller's whole environment (a shell's, not a two-entry one), the
// validation memo on as in `ccpool serve`. The memo learns on the second hit.
void BM_PlanAndLookupTinyHitMemo(benchmark::State& state) {
  Fixture f(0);
  std::ofstream(f.dir + "/k.cpp") << "int tiny(int x) { return x * 3 + 1; }\n";
  sleep(2);
  f.request.argv = {"g++", "-O2", "-c", "k.cpp", "-o", "k.o"};
  f.request.env.clear();
  for (char** e = environ; *e; ++e) f.request.env.emplace_back(*e);
  PlannerOptions options;
  options.validation_memo = true;
  Planner planner(options);
  f.prime(planner);
  time_hits(state, f, planner);
  // Per hit: answers the memo served one by one, and entries it vouched for whole.
  Planner::Counters c = planner.counters();
  state.counters["memo_served_per_hit"] =
      benchmark::Counter(static_cast<double>(c.memo_served), benchmark::Counter::kAvgIterations);
  state.counters["whole_per_hit"] = benchmark::Counter(static_cast<double>(c.memo_sets_served),
                                                       benchmark::Counter::kAvgIterations);
  state.SetLabel("env entries=" + std::to_string(f.request.env.size()));
}
BENCHMARK(BM_PlanAndLookupTinyHitMemo)->Unit(benchmark::kMicrosecond);

void BM_MissOverheadPlanAndConclude(benchmark::State& state) {
  Fixture f(static_cast<int>(state.range(0)));
  Planner planner;
  f.prime(planner);
  Plan plan = *planner.plan(f.request, f.dir + "/work");
  RunFacts facts = f.run(plan);  // the record stays in the work dir
  for (auto _ : state) {
    Plan p = *planner.plan(f.request, f.dir + "/work");
    Conclusion done = planner.conclude(plan, facts, f.storage);
    if (!done.finished.store) state.SkipWithError(("not stored: " + done.finished.why_not).c_str());
    benchmark::DoNotOptimize(p);
    benchmark::DoNotOptimize(done);
  }
}
BENCHMARK(BM_MissOverheadPlanAndConclude)->Arg(200)->Unit(benchmark::kMicrosecond);

void BM_DirectCompile(benchmark::State& state) {
  Fixture f(static_cast<int>(state.range(0)));
  std::vector<std::string> argv = f.request.argv;
  for (auto _ : state) {
    run_helper(argv, f.request.env, f.dir, std::chrono::seconds(120), "/usr/bin/g++");
  }
}
BENCHMARK(BM_DirectCompile)->Arg(200)->Unit(benchmark::kMillisecond)->Iterations(5);

}  // namespace

BENCHMARK_MAIN();
