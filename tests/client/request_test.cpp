#include "client/request.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "base/fs.h"
#include "client/fallback.h"
#include "tests/support/scratch.h"

namespace ccpool::client {
namespace {

TEST(Request, StripShimFromPreload) {
  EXPECT_EQ(strip_shim_from_preload("/opt/ccpool/lib/libccpool-shim.so"), "");
  EXPECT_EQ(strip_shim_from_preload("libccpool-shim.so"), "");
  EXPECT_EQ(strip_shim_from_preload("/a/libasan.so:/b/libccpool-shim.so /c/libx.so"),
            "/a/libasan.so:/c/libx.so");
  EXPECT_EQ(strip_shim_from_preload("/a/notlibccpool-shim.so"), "/a/notlibccpool-shim.so");
  EXPECT_EQ(strip_shim_from_preload("::/a/x.so::"), "/a/x.so");
}

TEST(Request, EnvironmentWithoutShim) {
  std::vector<std::string> env = {"A=1", "LD_PRELOAD=/l/libccpool-shim.so", "B=2"};
  EXPECT_EQ(environment_without_shim(env), (std::vector<std::string>{"A=1", "B=2"}));
  env[1] = "LD_PRELOAD=/l/libccpool-shim.so:/k/libjemalloc.so";
  EXPECT_EQ(environment_without_shim(env),
            (std::vector<std::string>{"A=1", "LD_PRELOAD=/k/libjemalloc.so", "B=2"}));
}

TEST(Request, SetAndFindEnv) {
  std::vector<std::string> env = {"CCPOOL_DISABLE=0", "CCPOOL_DISABLED=x"};
  set_env_entry(env, "CCPOOL_DISABLE", "1");
  EXPECT_EQ(env, (std::vector<std::string>{"CCPOOL_DISABLE=1", "CCPOOL_DISABLED=x"}));
  set_env_entry(env, "NEW", "v");
  ASSERT_NE(find_env(env, "NEW"), nullptr);
  EXPECT_EQ(*find_env(env, "NEW"), "NEW=v");
  EXPECT_EQ(find_env(env, "CCPOOL"), nullptr);
}

TEST(Request, RankFromEnv) {
  EXPECT_EQ(rank_from_env({"RANK=3", "LOCAL_RANK=1"}), 3);
  EXPECT_EQ(rank_from_env({"LOCAL_RANK=1"}), 1);
  EXPECT_EQ(rank_from_env({"RANK=x", "LOCAL_RANK=2"}), 2);
  EXPECT_EQ(rank_from_env({"RANK=-4"}), -1);
  EXPECT_EQ(rank_from_env({}), -1);
}

TEST(Request, ResolveProgram) {
  const std::string& dir = ccpool::testing::scratch_dir();
  std::string tool = dir + "/bin/mytool";
  ASSERT_EQ(::mkdir((dir + "/bin").c_str(), 0700), 0);
  ASSERT_TRUE(write_file_atomic(tool, "#!/bin/sh\n", 0755));
  std::vector<std::string> env = {"PATH=/nonexistent:" + dir + "/bin"};
  auto found = resolve_program("mytool", "/", env);
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(*found, tool);
  EXPECT_EQ(*resolve_program("/bin/sh", "/x", env), "/bin/sh");
  EXPECT_EQ(*resolve_program("sub/t", "/w", env), "/w/sub/t");
  auto missing = resolve_program("no-such-tool-ccpool", "/", env);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("no-such-tool-ccpool"), std::string::npos);
}

TEST(Request, BuildRequestReadsProcessState) {
  mode_t old = ::umask(027);
  auto r = build_request("/bin/true", {"true", "x"}, {"in"}, {"out"});
  ::umask(old);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->umask, 027u);
  EXPECT_EQ(r->client_pid, ::getpid());
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof cwd), nullptr);
  EXPECT_EQ(r->cwd, cwd);
  EXPECT_EQ(r->argv, (std::vector<std::string>{"true", "x"}));
  EXPECT_EQ(r->inputs, std::vector<std::string>{"in"});
  EXPECT_EQ(r->outputs, std::vector<std::string>{"out"});
  EXPECT_TRUE(ipc::check_exec_request(*r).has_value());
}

TEST(Fallback, SlotCount) {
  EXPECT_EQ(fallback_slot_count({"CCPOOL_JOBS=3"}), 3);
  int cpus = fallback_slot_count({});
  EXPECT_GE(cpus, 1);
  EXPECT_EQ(fallback_slot_count({"CCPOOL_JOBS=zero"}), cpus);
}

// The client cannot refuse to compile: a malformed CCPOOL_JOBS is not read as
// its leading digits (the service refuses it), the CPUs bound the fallbacks.
TEST(Fallback, SlotCountRefusesTrailingGarbage) {
  int cpus = fallback_slot_count({});
  std::string digits = std::to_string(cpus + 1);
  EXPECT_EQ(fallback_slot_count({"CCPOOL_JOBS=" + digits}), cpus + 1);
  EXPECT_EQ(fallback_slot_count({"CCPOOL_JOBS=" + digits + "x"}), cpus);
  EXPECT_EQ(fallback_slot_count({"CCPOOL_JOBS= " + digits}), cpus);
}

TEST(Fallback, SlotsAreExclusiveWithinBound) {
  std::string state = ccpool::testing::scratch_dir() + "/state";
  int a = acquire_fallback_slot(state, 2);
  ASSERT_GE(a, 0);
  // flock is per open file description: a second open in this process
  // competes like another process would.
  int b = acquire_fallback_slot(state, 2);
  ASSERT_GE(b, 0);
  EXPECT_TRUE(path_exists(state + "/slot.0"));
  EXPECT_TRUE(path_exists(state + "/slot.1"));
  EXPECT_FALSE(path_exists(state + "/slot.2"));
  // The lock must survive exec: no close-on-exec flag.
  EXPECT_EQ(::fcntl(a, F_GETFD) & FD_CLOEXEC, 0);
  ::close(a);
  ::close(b);
}

TEST(Fallback, LogAppendsOneLinePerCall) {
  std::string state = ccpool::testing::scratch_dir() + "/state";
  log_fallback(state, "service\tstopping\n", "/usr/bin/g++");
  log_fallback(state, "unreachable", "/usr/bin/gcc");
  auto text = read_file(state + "/fallbacks.log");
  ASSERT_TRUE(text);
  EXPECT_EQ(std::count(text->begin(), text->end(), '\n'), 2);
  EXPECT_NE(text->find("\tservice stopping \t/usr/bin/g++\n"), std::string::npos) << *text;
  EXPECT_NE(text->find("\t" + std::to_string(::getpid()) + "\tunreachable\t/usr/bin/gcc\n"),
            std::string::npos);
}

}  // namespace
}  // namespace ccpool::client
