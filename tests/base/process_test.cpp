#include "base/process.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "tests/support/scratch.h"

namespace ccpool {
namespace {

TEST(Process, SearchPathTakesTheFirstExecutableRegularFile) {
  const std::string& dir = testing::scratch_dir();
  ASSERT_EQ(::mkdir((dir + "/a").c_str(), 0700), 0);
  ASSERT_EQ(::mkdir((dir + "/b").c_str(), 0700), 0);
  ASSERT_EQ(::mkdir((dir + "/a/tool").c_str(), 0700), 0);      // a directory is skipped
  ASSERT_TRUE(write_file_atomic(dir + "/b/tool", "x", 0644));  // not executable: skipped
  ASSERT_TRUE(write_file_atomic(dir + "/c-tool", "x", 0755));
  std::string path = dir + "/missing:" + dir + "/a:" + dir + "/b:";
  std::string first_existing;
  EXPECT_EQ(search_path("tool", path, dir, &first_existing), "");
  EXPECT_EQ(first_existing, dir + "/a/tool");
  ASSERT_TRUE(write_file_atomic(dir + "/tool", "x", 0755));
  EXPECT_EQ(search_path("tool", path, dir), dir + "/tool");  // the empty entry is the cwd
  EXPECT_EQ(search_path("sh", kDefaultSearchPath, "/"), "/bin/sh");
}

TEST(Process, ParentPidOfThisProcess) {
  EXPECT_EQ(parent_pid(::getpid()), ::getppid());
  EXPECT_EQ(parent_pid(-5), -1);
}

TEST(Process, CStringArrayIsNullTerminated) {
  std::vector<std::string> strings = {"a", "bc"};
  std::vector<char*> array = c_string_array(strings);
  ASSERT_EQ(array.size(), 3u);
  EXPECT_STREQ(array[1], "bc");
  EXPECT_EQ(array[2], nullptr);
}

}  // namespace
}  // namespace ccpool
