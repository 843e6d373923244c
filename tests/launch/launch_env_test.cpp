// compute_launch_env / render_launch_env: pure, no processes.
#include "launch/launch_env.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "base/fs.h"
#include "base/process_facts.h"
#include "tests/support/scratch.h"

namespace ccpool::launch {
namespace {

// Without the Python hooks unless a test asks for them: the fair share is the
// rule then (the hooks' settings are tested on their own).
LaunchOptions options(int jobs, int ranks, bool python_hooks = false) {
  LaunchOptions o;
  o.jobs = jobs;
  o.ranks = ranks;
  o.socket = "/run/u/ccpool/sock";
  o.exe_dir = "/opt/ccpool/bin";
  o.python_hooks = python_hooks;
  return o;
}

const EnvSetting* find(const LaunchEnv& env, const std::string& name) {
  for (const EnvSetting& s : env.settings)
    if (s.name == name) return &s;
  return nullptr;
}

std::string value(const LaunchEnv& env, const std::string& name) {
  const EnvSetting* s = find(env, name);
  return s ? s->value : "<unset>";
}

TEST(LaunchEnv, FairShareIsJobsOverRanksAtLeastOne) {
  auto env = compute_launch_env(options(8, 8), {}, {});
  ASSERT_TRUE(env);
  EXPECT_EQ(value(*env, "TORCHINDUCTOR_COMPILE_THREADS"), "1");
  EXPECT_EQ(value(*env, "CCPOOL_WORKERS"), "1");
  EXPECT_EQ(compute_launch_env(options(4, 8), {}, {})->workers, 1);
  EXPECT_EQ(compute_launch_env(options(32, 3), {}, {})->workers, 10);
  EXPECT_EQ(value(*env, "LD_PRELOAD"), "/opt/ccpool/bin/../lib/libccpool-shim.so");
  EXPECT_EQ(value(*env, "CCPOOL_CLIENT"), "/opt/ccpool/bin/ccpool-client");
  EXPECT_EQ(value(*env, "CCPOOL_SOCKET"), "/run/u/ccpool/sock");
  EXPECT_EQ(find(*env, "TORCHINDUCTOR_REDIS_URL"), nullptr);
}

TEST(LaunchEnv, UserValuesAreKeptAndPreloadIsPrepended) {
  EnvMap user{{"TORCHINDUCTOR_COMPILE_THREADS", "32"}, {"LD_PRELOAD", "/lib/libjemalloc.so"}};
  auto env = compute_launch_env(options(8, 8), {}, user);
  ASSERT_TRUE(env);
  const EnvSetting* threads = find(*env, "TORCHINDUCTOR_COMPILE_THREADS");
  ASSERT_NE(threads, nullptr);
  EXPECT_TRUE(threads->kept);
  EXPECT_EQ(threads->value, "32");
  EXPECT_EQ(value(*env, "LD_PRELOAD"),
            "/opt/ccpool/bin/../lib/libccpool-shim.so:/lib/libjemalloc.so");
  std::vector<std::string> applied = apply_launch_env(*env, user);
  EXPECT_NE(std::find(applied.begin(), applied.end(), "TORCHINDUCTOR_COMPILE_THREADS=32"),
            applied.end());
  EXPECT_NE(std::find(applied.begin(), applied.end(), "CCPOOL_WORKERS=1"), applied.end());
  // Running it again on the result changes nothing: the shim is not added twice.
  EnvMap again{{"LD_PRELOAD", value(*env, "LD_PRELOAD")}};
  EXPECT_TRUE(find(*compute_launch_env(options(8, 8), {}, again), "LD_PRELOAD")->kept);
}

TEST(LaunchEnv, PythonHooksGoOnPythonPathAndLetRanksUseTheNodePool) {
  auto env = compute_launch_env(options(8, 8, true), {}, {});
  ASSERT_TRUE(env);
  EXPECT_EQ(value(*env, "PYTHONPATH"), "/opt/ccpool/bin/../share/ccpool/python/ccpool/_bootstrap");
  EXPECT_EQ(value(*env, "CCPOOL_RESP_SOCKET"), "/run/u/ccpool/resp.sock");
  // The node pool bounds the processes: each rank may keep `jobs` requests in
  // flight (at least 2, or Inductor compiles Triton kernels in the rank).
  EXPECT_EQ(value(*env, "TORCHINDUCTOR_COMPILE_THREADS"), "8");
  EXPECT_EQ(value(*env, "CCPOOL_WORKERS"), "1");  // the sidecar cap, when a rank falls back
  EXPECT_EQ(
      value(*compute_launch_env(options(1, 4, true), {}, {}), "TORCHINDUCTOR_COMPILE_THREADS"),
      "2");

  EnvMap user{{"PYTHONPATH", "/home/u/src:/opt/lib"}};
  env = compute_launch_env(options(8, 8, true), {}, user);
  EXPECT_EQ(value(*env, "PYTHONPATH"),
            "/opt/ccpool/bin/../share/ccpool/python/ccpool/_bootstrap:/home/u/src:/opt/lib");
  EnvMap again{{"PYTHONPATH", value(*env, "PYTHONPATH")}};
  EXPECT_TRUE(find(*compute_launch_env(options(8, 8, true), {}, again), "PYTHONPATH")->kept);

  // CCPOOL_PYTHON_HOOKS=0 in the environment turns them off like the flag.
  env = compute_launch_env(options(8, 8, true), {}, {{"CCPOOL_PYTHON_HOOKS", "0"}});
  EXPECT_EQ(find(*env, "PYTHONPATH"), nullptr);
  EXPECT_EQ(find(*env, "CCPOOL_RESP_SOCKET"), nullptr);
  EXPECT_EQ(value(*env, "TORCHINDUCTOR_COMPILE_THREADS"), "1");
}

TEST(LaunchEnv, RanksComeFromFlagThenCommandThenEnvironment) {
  EXPECT_EQ(ranks_from_command({"torchrun", "--nproc-per-node", "8", "train.py"}), 8);
  EXPECT_EQ(ranks_from_command({"torchrun", "--nproc_per_node=4", "train.py"}), 4);
  EXPECT_EQ(ranks_from_command({"accelerate", "launch", "--num_processes", "2", "t.py"}), 2);
  EXPECT_EQ(ranks_from_command({"torchrun", "--nproc-per-node", "gpu", "t.py"}), 0);
  EXPECT_EQ(ranks_from_command({"python", "t.py", "--", "--nproc-per-node", "8"}), 0);
  EXPECT_EQ(ranks_from_command({"torchrun", "--nproc-per-node"}), 0);

  EnvMap slurm{{"SLURM_NTASKS_PER_NODE", "4"}, {"LOCAL_WORLD_SIZE", "2"}};
  std::vector<std::string> cmd{"torchrun", "--nproc-per-node=8", "t.py"};
  EXPECT_EQ(compute_launch_env(options(16, 3), cmd, slurm)->ranks, 3);
  EXPECT_EQ(compute_launch_env(options(16, 0), cmd, slurm)->ranks, 8);
  EXPECT_EQ(compute_launch_env(options(16, 0), {"python"}, slurm)->ranks, 2);
  EXPECT_EQ(compute_launch_env(options(16, 0), {"python"}, {{"SLURM_NTASKS_PER_NODE", "4"}})->ranks,
            4);
  EXPECT_EQ(compute_launch_env(options(16, 0), {"python"}, {})->ranks, 1);
  EXPECT_EQ(value(*compute_launch_env(options(16, 0), cmd, {}), "TORCHINDUCTOR_COMPILE_THREADS"),
            "2");
}

TEST(LaunchEnv, JobsComeFromFlagThenEnvironmentThenCpus) {
  EXPECT_EQ(compute_launch_env(options(0, 1), {}, {{"CCPOOL_JOBS", "6"}})->jobs, 6);
  EXPECT_EQ(compute_launch_env(options(3, 1), {}, {{"CCPOOL_JOBS", "6"}})->jobs, 3);
  EXPECT_EQ(compute_launch_env(options(0, 1), {}, {})->jobs, available_cpus());
  auto bad = compute_launch_env(options(0, 1), {}, {{"CCPOOL_JOBS", "many"}});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.error().message.find("CCPOOL_JOBS='many'"), std::string::npos);
  EXPECT_FALSE(compute_launch_env(options(1, 0), {}, {{"LOCAL_WORLD_SIZE", "-1"}}));
}

// The one grammar (base/process_facts.h): "8x" is not 8; the flag wins
// without the variable being read, as `ccpool serve` does.
TEST(LaunchEnv, JobsVariableWithTrailingGarbageIsRefusedUnlessTheFlagIsGiven) {
  auto bad = compute_launch_env(options(0, 1), {}, {{"CCPOOL_JOBS", "8x"}});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message,
            "CCPOOL_JOBS='8x' is not a positive whole number (1-1000000); unset it or set a "
            "number of slots, e.g. CCPOOL_JOBS=8");
  EXPECT_EQ(compute_launch_env(options(3, 1), {}, {{"CCPOOL_JOBS", "8x"}})->jobs, 3);
}

TEST(LaunchEnv, FrameworksCachePointsAtTheRespFront) {
  LaunchOptions o = options(8, 1);
  o.frameworks_cache = true;
  auto env = compute_launch_env(o, {}, {});
  EXPECT_EQ(value(*env, "TORCHINDUCTOR_REDIS_URL"), "unix:///run/u/ccpool/resp.sock");
  EXPECT_EQ(value(*env, "TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE"), "1");
  EXPECT_EQ(find(*env, "TRITON_CACHE_MANAGER"), nullptr);  // Triton 3.7.1's backend is broken
  EXPECT_EQ(find(*env, "TRITON_REMOTE_CACHE_BACKEND"), nullptr);
  EXPECT_EQ(find(*env, "TRITON_REDIS_PORT"), nullptr);
  o.resp_port = 6390;
  env = compute_launch_env(o, {}, {});
  EXPECT_EQ(value(*env, "TRITON_REDIS_PORT"), "6390");
  EXPECT_EQ(value(*env, "TRITON_REDIS_HOST"), "127.0.0.1");
}

TEST(LaunchEnv, RenderingQuotesForEachShell) {
  LaunchOptions o = options(8, 2);
  auto env = compute_launch_env(o, {}, {{"CCPOOL_CLIENT", "/it's \"here\"\\"}});
  ASSERT_TRUE(env);
  std::string sh = render_launch_env(*env, Shell::kSh, "ccpool serve --socket S");
  EXPECT_EQ(sh.rfind("# ", 0), 0u);
  EXPECT_NE(sh.find("ccpool serve --socket S"), std::string::npos);
  EXPECT_NE(sh.find("export CCPOOL_CLIENT='/it'\\''s \"here\"\\'\n"), std::string::npos) << sh;
  EXPECT_NE(sh.find("export TORCHINDUCTOR_COMPILE_THREADS='4'\n"), std::string::npos);
  std::string fish = render_launch_env(*env, Shell::kFish, "hint");
  EXPECT_NE(fish.find("set -gx CCPOOL_CLIENT '/it\\'s \"here\"\\\\'\n"), std::string::npos) << fish;
  auto json = nlohmann::json::parse(render_launch_env(*env, Shell::kJson, "hint"));
  EXPECT_EQ(json["CCPOOL_CLIENT"], "/it's \"here\"\\");
  EXPECT_EQ(json["CCPOOL_WORKERS"], "4");
  EXPECT_EQ(json.size(), env->settings.size());
  EXPECT_FALSE(parse_shell("csh"));
  EXPECT_EQ(*parse_shell("bash"), Shell::kSh);
}

// The wheel (pyproject.toml) installs the CMake install tree under
// site-packages/<wheel.install-dir>, beside the importable package: the
// lookups relative to the binaries' directory find the shim, the client and
// a package directory that holds ccpool alone (the service puts it first on
// its workers' PYTHONPATH, so nothing else of the venv may be there).
TEST(LaunchEnv, LookupsFindTheWheelLayout) {
  auto pyproject = read_file(CCPOOL_SOURCE_DIR "/pyproject.toml");
  ASSERT_TRUE(pyproject) << pyproject.error().message;
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(*pyproject, m, std::regex("\\nwheel\\.install-dir = \"([^\"]+)\"")));
  EXPECT_EQ(m[1], "ccpool/_native");
  std::string site = testing::scratch_dir() + "/site-packages";
  std::string prefix = site + "/" + m[1].str();
  // Where the install rules put things (cli/, shim/, python/CMakeLists.txt).
  for (const char* file : {"bin/ccpool", "bin/ccpool-cli", "bin/ccpool-client",
                           "lib/libccpool-shim.so", "share/ccpool/python/ccpool/__init__.py",
                           "share/ccpool/python/ccpool/_bootstrap/sitecustomize.py"}) {
    std::filesystem::create_directories(std::filesystem::path(prefix + "/" + file).parent_path());
    std::ofstream(prefix + "/" + file) << "";
  }
  std::ofstream(site + "/ccpool/__init__.py") << "";  // the importable package (wheel.packages)
  std::string exe_dir = prefix + "/bin";
  struct stat st {};
  EXPECT_EQ(::stat(shim_path_for(exe_dir).c_str(), &st), 0) << shim_path_for(exe_dir);
  EXPECT_EQ(::stat(client_path_for(exe_dir).c_str(), &st), 0) << client_path_for(exe_dir);
  std::string python_dir = python_dir_for(exe_dir);
  EXPECT_EQ(::stat((python_dir + "/ccpool/_bootstrap/sitecustomize.py").c_str(), &st), 0)
      << python_dir;
  std::vector<std::string> entries;
  for (const auto& e : std::filesystem::directory_iterator(python_dir))
    entries.push_back(e.path().filename());
  EXPECT_EQ(entries, std::vector<std::string>{"ccpool"});
}

}  // namespace
}  // namespace ccpool::launch
