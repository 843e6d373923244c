// `ccpool serve` reads the jobs setting with the one grammar (base/process_facts.h):
// "8x" from the flag or from CCPOOL_JOBS is refused before anything starts.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "tests/shim/child_process.h"
#include "tests/support/scratch.h"

namespace ccpool::testing {
namespace {

class ServeJobsTest : public ::testing::Test {
 protected:
  void SetUp() override { m_dir = scratch_dir(); }

  // A short idle timeout: were the value accepted, the service would exit on its own.
  ChildOutput serve(const std::vector<std::string>& more, const EnvVars& env) {
    std::vector<std::string> argv{
        build_binary("ccpool"), "serve", "--foreground",   "--no-resp",      "--socket",
        m_dir + "/sock",        "--dir", m_dir + "/store", "--idle-timeout", "1s"};
    argv.insert(argv.end(), more.begin(), more.end());
    return run_child(argv, env, m_dir);
  }

  bool socket_exists() const {
    struct stat st;
    return ::stat((m_dir + "/sock").c_str(), &st) == 0;
  }

  EnvVars base_env() const { return {{"PATH", "/usr/bin:/bin"}, {"HOME", m_dir}}; }

  std::string m_dir;
};

// From the flag and from the variable: the whole message, exit 2, no socket.
TEST_F(ServeJobsTest, TrailingGarbageIsRefusedFromEitherSource) {
  struct Case {
    std::vector<std::string> flags;
    const char* variable;
    const char* message;
  };
  const Case cases[] = {
      {{"--jobs", "8x"},
       nullptr,
       "ccpool: --jobs '8x' is not a positive whole number (1-1000000); give a number of slots, "
       "e.g. --jobs 8\n"},
      {{},
       "8x",
       "ccpool: CCPOOL_JOBS='8x' is not a positive whole number (1-1000000); unset it or set a "
       "number of slots, "
       "e.g. CCPOOL_JOBS=8\n"},
  };
  for (const Case& c : cases) {
    EnvVars env = base_env();
    if (c.variable) env["CCPOOL_JOBS"] = c.variable;
    ChildOutput r = serve(c.flags, env);
    EXPECT_EQ(r.exit_code, 2) << c.message;
    EXPECT_EQ(r.output, c.message);
    EXPECT_FALSE(socket_exists());
  }
}

TEST_F(ServeJobsTest, TheFlagWinsOverTheVariable) {
  EnvVars env = base_env();
  env["CCPOOL_JOBS"] = "8x";
  ChildOutput r = serve({"--jobs", "0"}, env);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--jobs '0' is not a positive whole number"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace ccpool::testing
