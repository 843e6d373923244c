// make_environment: what a worker of a rank's pool gets, and which requests
// share workers (the same interpreter by identity, the same variables but the
// per-rank ones).
#include "workers/environment.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "tests/support/scratch.h"

namespace ccpool::workers {
namespace {

PoolRequest request(std::vector<std::string> env, std::string python = "/usr/bin/python3") {
  return PoolRequest{
      std::move(python), ccpool::testing::scratch_dir(), std::move(env), {"--pickler=m.P"}};
}

std::shared_ptr<const Environment> make(const PoolRequest& r) {
  auto e =
      make_environment(r, "/opt/ccpool/share/ccpool/python", {"CCPOOL_RESP_SOCKET=/run/resp.sock"});
  EXPECT_TRUE(e.has_value()) << (e ? "" : e.error().message);
  return e ? *e : nullptr;
}

bool has(const Environment& e, const std::string& entry) {
  return std::find(e.env.begin(), e.env.end(), entry) != e.env.end();
}

TEST(WorkerEnvironment, RanksOfOneJobShareAndWhatWorkersGet) {
  auto r0 = make(request(
      {"RANK=0", "LOCAL_RANK=0", "TORCHELASTIC_ERROR_FILE=/t/0/error.json", "PYTHONPATH=/src",
       "LD_PRELOAD=/opt/ccpool/lib/libccpool-shim.so:/lib/libjemalloc.so",
       "TORCHINDUCTOR_CACHE_DIR=/c", "CCPOOL_SOCKET=/run/sock", "CUDA_VISIBLE_DEVICES=0"}));
  auto r1 = make(request(
      {"RANK=1", "LOCAL_RANK=1", "TORCHELASTIC_ERROR_FILE=/t/1/error.json", "PYTHONPATH=/src",
       "LD_PRELOAD=/opt/ccpool/lib/libccpool-shim.so:/lib/libjemalloc.so",
       "TORCHINDUCTOR_CACHE_DIR=/c", "CCPOOL_SOCKET=/run/sock", "CUDA_VISIBLE_DEVICES=1"}));
  ASSERT_TRUE(r0 && r1);
  EXPECT_EQ(r0->id, r1->id);
  EXPECT_EQ(r0->env, r1->env);
  EXPECT_TRUE(has(*r0, "PYTHONPATH=/opt/ccpool/share/ccpool/python:/src"));
  EXPECT_TRUE(has(*r0, "LD_PRELOAD=/lib/libjemalloc.so"));  // the shim is gone, the rest stays
  EXPECT_TRUE(has(*r0, "TORCH_WARM_POOL=0"));
  EXPECT_TRUE(has(*r0, "CCPOOL_RESP_SOCKET=/run/resp.sock"));
  EXPECT_TRUE(has(*r0, "TORCHINDUCTOR_CACHE_DIR=/c"));
  for (const std::string& e : r0->env) {
    EXPECT_NE(e.rfind("RANK=", 0), 0u) << e;
    EXPECT_NE(e.rfind("CCPOOL_SOCKET=", 0), 0u) << e;
    EXPECT_NE(e.rfind("CUDA_VISIBLE_DEVICES=", 0), 0u) << e;
  }
}

TEST(WorkerEnvironment, TwoLaunchesOfOneJobShareWorkers) {
  // torchrun picks a new rendezvous port and run id for every launch.
  auto first = make(
      request({"MASTER_PORT=29500", "MASTER_ADDR=127.0.0.1", "TORCHELASTIC_RUN_ID=a1", "X=1"}));
  auto second = make(
      request({"MASTER_PORT=41234", "MASTER_ADDR=127.0.0.1", "TORCHELASTIC_RUN_ID=b2", "X=1"}));
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->id, second->id);
}

TEST(WorkerEnvironment, AnythingElseThatDiffersSeparatesThem) {
  auto base = make(request({"TORCHINDUCTOR_MAX_AUTOTUNE=0"}));
  auto other_var = make(request({"TORCHINDUCTOR_MAX_AUTOTUNE=1"}));
  PoolRequest other_args = request({"TORCHINDUCTOR_MAX_AUTOTUNE=0"});
  other_args.args = {"--pickler=m.Q"};
  ASSERT_TRUE(base && other_var);
  EXPECT_NE(base->id, other_var->id);
  EXPECT_NE(base->id, make(other_args)->id);
}

TEST(WorkerEnvironment, TheInterpreterIsKnownByWhatItIsNotItsName) {
  std::string dir = ccpool::testing::scratch_dir();
  std::string python = dir + "/python";
  std::filesystem::copy_file("/bin/true", python);
  auto before = make(request({}, python));
  // Replaced in place (a venv rebuilt, an upgrade): another interpreter.
  std::filesystem::remove(python);
  std::filesystem::copy_file("/bin/false", python);
  auto after = make(request({}, python));
  ASSERT_TRUE(before && after);
  EXPECT_NE(before->id, after->id);
}

TEST(WorkerEnvironment, AnInterpreterThatCannotRunIsRefusedNamingIt) {
  std::string dir = ccpool::testing::scratch_dir();
  std::ofstream(dir + "/not-exec") << "#!/bin/sh\n";
  for (const std::string& python :
       {dir + "/missing", dir + "/not-exec", std::string("python3"), dir}) {
    auto e = make_environment(request({}, python), "/p", {});
    ASSERT_FALSE(e.has_value()) << python;
    EXPECT_EQ(e.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(e.error().message.find(python), std::string::npos) << e.error().message;
  }
  PoolRequest bad_cwd = request({});
  bad_cwd.cwd = dir + "/nowhere";
  auto e = make_environment(bad_cwd, "/p", {});
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.error().message.find("nowhere"), std::string::npos);
}

}  // namespace
}  // namespace ccpool::workers
