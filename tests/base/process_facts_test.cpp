#include "base/process_facts.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

namespace ccpool {
namespace {

TEST(ProcessFacts, JobsAreDigitsOnly) {
  EXPECT_EQ(parse_jobs("8", "--jobs").value(), 8);
  EXPECT_EQ(parse_jobs("128", "CCPOOL_JOBS").value(), 128);
  EXPECT_EQ(parse_jobs("1000000", "--jobs").value(), kMaxJobs);
  for (std::string_view bad :
       {"8x", "x8", "", "0", "-1", "+8", " 8", "8 ", "2.5", "many", "1000001", "99999999999"}) {
    EXPECT_FALSE(parse_jobs(bad, "--jobs").has_value()) << "'" << bad << "'";
  }
}

TEST(ProcessFacts, JobsErrorsNameTheValueAndTheFix) {
  auto flag = parse_jobs("8x", "--jobs");
  ASSERT_FALSE(flag);
  EXPECT_EQ(flag.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(flag.error().message,
            "--jobs '8x' is not a positive whole number (1-1000000); give a number of slots, e.g. "
            "--jobs 8");
  auto env = parse_jobs("8x", "CCPOOL_JOBS");
  ASSERT_FALSE(env);
  EXPECT_EQ(env.error().message,
            "CCPOOL_JOBS='8x' is not a positive whole number (1-1000000); unset it or set a number "
            "of slots, "
            "e.g. CCPOOL_JOBS=8");
}

TEST(ProcessFacts, JobsSettingPrefersTheFlagThenTheVariable) {
  EXPECT_EQ(jobs_setting("", "").value(), 0);  // neither: the caller's default
  EXPECT_EQ(jobs_setting("", "6").value(), 6);
  EXPECT_EQ(jobs_setting("3", "6").value(), 3);
  EXPECT_EQ(jobs_setting("3", "8x").value(), 3);  // the flag wins; the variable is not read
  EXPECT_NE(jobs_setting("", "8x").error().message.find("CCPOOL_JOBS='8x'"), std::string::npos);
  EXPECT_NE(jobs_setting("8x", "6").error().message.find("--jobs '8x'"), std::string::npos);
}

TEST(ProcessFacts, EnvValueMatchesTheWholeName) {
  std::vector<std::string> env{"PATHX=no", "PATH=/bin", "EMPTY=", "NOEQUALS"};
  EXPECT_EQ(env_value(env, "PATH").value(), "/bin");
  EXPECT_EQ(env_value(env, "EMPTY").value(), "");
  EXPECT_FALSE(env_value(env, "PAT"));
  EXPECT_FALSE(env_value(env, "NOEQUALS"));
}

TEST(ProcessFacts, OwnEnvReadsThisProcess) {
  ASSERT_EQ(::setenv("CCPOOL_PROCESS_FACTS_TEST", "v", 1), 0);
  EXPECT_EQ(own_env("CCPOOL_PROCESS_FACTS_TEST").value(), "v");
  ASSERT_EQ(::unsetenv("CCPOOL_PROCESS_FACTS_TEST"), 0);
  EXPECT_FALSE(own_env("CCPOOL_PROCESS_FACTS_TEST"));
}

TEST(ProcessFacts, OwnExecutableIsThisTestBinary) {
  std::string exe = own_executable();
  ASSERT_FALSE(exe.empty());
  EXPECT_EQ(exe.substr(exe.rfind('/') + 1), "base_test");
  EXPECT_EQ(own_executable_dir() + "/base_test", exe);
}

TEST(ProcessFacts, AvailableCpusIsTheAffinityMask) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(::sched_getaffinity(0, sizeof set, &set), 0);
  EXPECT_EQ(available_cpus(), CPU_COUNT(&set));
}

}  // namespace
}  // namespace ccpool
