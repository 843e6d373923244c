// @file expansion is bounded (issue 12, found by cc_args_fuzz): a response
// file that names itself several times grew as fanout^depth, and one that is
// not a small regular file (a 2 MiB file, /dev/zero, a FIFO) was read whole or
// blocked a worker. Such commands pass through unchanged.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "compiler/cc_args.h"
#include "tests/compiler/executor.h"
#include "tests/support/scratch.h"

namespace ccpool::compiler {
namespace {

// r0 names r1 four times, r1 names r2 four times ... r10 holds one argument:
// within the depth bound, but 4^10 reads and a million arguments unbounded.
TEST(ResponseFile, FanOutIsRefused) {
  std::string dir = ::ccpool::testing::scratch_dir();
  for (int i = 0; i < 10; ++i) {
    std::string next = " @r" + std::to_string(i + 1);
    testing::write_text(dir + "/r" + std::to_string(i), next + next + next + next + "\n");
  }
  testing::write_text(dir + "/r10", "-DX\n");
  CcArgs a = parse_cc_args({"g++", "-c", "k.c", "@r0"}, dir);
  EXPECT_NE(a.refused.find("response files"), std::string::npos) << a.refused;
  EXPECT_LE(a.args.size(), 100000u);
}

TEST(ResponseFile, LargeOrSpecialFilesAreRefused) {
  std::string dir = ::ccpool::testing::scratch_dir();
  testing::write_text(dir + "/big", std::string(2 << 20, 'x'));
  EXPECT_NE(parse_cc_args({"g++", "-c", "k.c", "@big"}, dir).refused, "");
  ASSERT_EQ(::mkfifo((dir + "/fifo").c_str(), 0600), 0);
  EXPECT_NE(parse_cc_args({"g++", "-c", "k.c", "@fifo"}, dir).refused, "");
  EXPECT_NE(parse_cc_args({"g++", "-c", "k.c", "@/dev/zero"}, dir).refused, "");
}

TEST(ResponseFile, NestingWithinTheBoundsStillExpands) {
  std::string dir = ::ccpool::testing::scratch_dir();
  for (int i = 0; i < 10; ++i) {
    testing::write_text(dir + "/r" + std::to_string(i),
                        "-DL" + std::to_string(i) + " @r" + std::to_string(i + 1));
  }
  testing::write_text(dir + "/r10", "-O2");
  CcArgs a = parse_cc_args({"g++", "-c", "k.c", "@r0"}, dir);
  EXPECT_EQ(a.refused, "");
  EXPECT_EQ(a.args.size(), 13u);
}

}  // namespace
}  // namespace ccpool::compiler
