// is_cc_name matches the language of the regex it replaced (issue 12: a
// 20,000-character argv[0] overflowed a worker's stack inside std::regex).
#include "compiler/cc_name.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <functional>
#include <regex>
#include <string>
#include <vector>

#include "compiler/planner.h"
#include "tests/compiler/executor.h"
#include "tests/support/scratch.h"

namespace ccpool::compiler {
namespace {

bool by_regex(const std::string& name) {
  static const std::regex kPattern(
      R"(^([A-Za-z0-9_.]+-)*(gcc|g\+\+|cc|c\+\+|clang|clang\+\+)(-[0-9]+(\.[0-9]+)*)?$)");
  return std::regex_match(name, kPattern);
}

TEST(CcNameTest, KnownNames) {
  for (const char* yes :
       {"gcc", "g++", "cc", "c++", "clang", "clang++", "gcc-12", "g++-12.2", "clang++-14",
        "x86_64-linux-gnu-gcc-12", "aarch64-linux-gnu-g++", "my.tool_1-cc"}) {
    EXPECT_TRUE(is_cc_name(yes)) << yes;
  }
  for (const char* no : {"", "gcc-ar", "c++filt", "nvcc", "gcc-", "gcc-12.", "gcc-1..2", "-gcc",
                         "a--gcc", "gcc12", "g++-x", "clang-cl", "ptxas", "x/gcc"}) {
    EXPECT_FALSE(is_cc_name(no)) << no;
  }
}

// Every name of up to 5 characters over an alphabet that reaches each branch,
// and composed names, agree with the regex.
TEST(CcNameTest, AgreesWithTheRegex) {
  const std::string alphabet = "gc+-1.al";
  std::vector<std::string> names = {""};
  for (size_t len = 0, from = 0; len < 5; ++len) {
    size_t to = names.size();
    for (size_t i = from; i < to; ++i) {
      for (char c : alphabet) names.push_back(names[i] + c);
    }
    from = to;
  }
  for (const char* prefix : {"", "x-", "x86_64-linux-gnu-", "-", "a--", "a.b_c-", "a b-", "gcc-"}) {
    for (const char* driver : {"gcc", "g++", "cc", "c++", "clang", "clang++", "clan", "g+"}) {
      for (const char* suffix : {"", "-1", "-12.2.3", "-", "-1.", "-.1", "-1..2", "x", "-a"}) {
        names.push_back(std::string(prefix) + driver + suffix);
      }
    }
  }
  size_t matched = 0;
  for (const std::string& name : names) {
    bool expected = by_regex(name);
    matched += expected;
    ASSERT_EQ(is_cc_name(name), expected) << "'" << name << "'";
  }
  EXPECT_GT(matched, 100u);
}

// Runs fn on a thread with a 256 KiB stack (oneTBB workers have a few MiB;
// std::regex needed far more for a long name).
void on_small_stack(const std::function<void()>& fn) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  pthread_t thread;
  auto body = [](void* arg) -> void* {
    (*static_cast<const std::function<void()>*>(arg))();
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&thread, &attr, body, const_cast<std::function<void()>*>(&fn)), 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
}

TEST(CcNameTest, ALongArgv0IsPlannedOnASmallStack) {
  std::string long_name(20000, 'a');
  for (size_t i = 1; i < long_name.size(); i += 2) long_name[i] = '-';
  Request request;
  request.program = "/bin/true";
  request.argv = {std::string(20000, 'x'), "a.c"};
  request.cwd = ccpool::testing::scratch_dir();
  request.env = testing::base_env();
  Planner planner;
  for (const std::string& argv0 : {std::string(20000, 'x'), long_name, long_name + "gcc-1"}) {
    request.argv[0] = argv0;
    bool planned = false;
    on_small_stack([&] {
      auto plan = planner.plan(request, ccpool::testing::scratch_dir() + "/work");
      planned = plan.has_value();
    });
    EXPECT_TRUE(planned);
  }
  EXPECT_TRUE(is_cc_name(long_name + "gcc-1"));
  EXPECT_FALSE(is_cc_name(long_name));
}

}  // namespace
}  // namespace ccpool::compiler
