// Compiler-name and sidecar matching (shim/match.c), without processes.
#include "shim/match.h"

#include <gtest/gtest.h>

namespace {

bool matches(const char* spec, const char* name) {
  ccpool_compiler_list list;
  ccpool_compiler_list_init(&list, spec);
  return ccpool_compiler_matches(&list, name) != 0;
}

TEST(ShimMatch, DefaultListAcceptsVersionedAndTripletForms) {
  for (const char* name :
       {"gcc", "g++", "cc", "c++", "clang", "clang++", "ptxas", "g++-12", "gcc-12.2", "clang++-14",
        "x86_64-linux-gnu-gcc-12", "x86_64-linux-gnu-g++", "aarch64-linux-gnu-gcc", "ar", "ranlib",
        "x86_64-linux-gnu-ar", "x86_64-linux-gnu-ranlib"}) {
    EXPECT_TRUE(matches(nullptr, name)) << name;
  }
  for (const char* name : {"gcc-ar", "gcc-ar-12", "x86_64-linux-gnu-gcc-nm-12", "c++filt", "nvcc",
                           "ccache", "cpp", "clang-tidy", "python3", "g++-", "g++-x", "", "ld",
                           "tar", "llvm-ar", "gcc-ranlib", "x86_64-linux-gnu-gcc-ar-12", "nm"}) {
    EXPECT_FALSE(matches(nullptr, name)) << name;
  }
}

TEST(ShimMatch, EnvironmentListReplacesDefaultAndAcceptsGlobs) {
  EXPECT_TRUE(matches("nvcc,my*cc", "nvcc"));
  EXPECT_TRUE(matches("nvcc,my*cc", "nvcc-12.4"));
  EXPECT_TRUE(matches("nvcc:my*cc", "mybigcc"));
  EXPECT_FALSE(matches("nvcc:my*cc", "gcc"));
  EXPECT_FALSE(matches("nvcc:my*cc", "mycc2"));
  EXPECT_TRUE(matches("::icx,,", "icx"));
  ccpool_compiler_list list;
  ccpool_compiler_list_init(&list, ":,:");
  EXPECT_EQ(list.count, 0);
}

TEST(ShimMatch, GlobAndBasename) {
  EXPECT_TRUE(ccpool_glob_match("*", ""));
  EXPECT_TRUE(ccpool_glob_match("g?+*", "g++-12"));
  EXPECT_FALSE(ccpool_glob_match("g?+", "g++-12"));
  EXPECT_STREQ(ccpool_basename("/usr/bin/g++"), "g++");
  EXPECT_STREQ(ccpool_basename("g++"), "g++");
  EXPECT_STREQ(ccpool_basename("dir/"), "");
}

TEST(ShimMatch, SidecarWorkersArgument) {
  const char* sidecar[] = {"python3", "/x/site-packages/torch/_inductor/compile_worker/__main__.py",
                           "--kind=fork", "--workers=32", nullptr};
  EXPECT_EQ(ccpool_sidecar_workers_index(const_cast<char**>(sidecar), 100), 3);
  EXPECT_EQ(ccpool_sidecar_workers_index(const_cast<char**>(sidecar), 3), -1);  // bounded scan
  const char* other[] = {"python3", "train.py", "--workers=32", nullptr};
  EXPECT_EQ(ccpool_sidecar_workers_index(const_cast<char**>(other), 100), -1);
  EXPECT_EQ(ccpool_parse_workers("--workers=32"), 32);
  EXPECT_EQ(ccpool_parse_workers("--workers=0"), -1);
  EXPECT_EQ(ccpool_parse_workers("--workers=3x"), -1);
  EXPECT_EQ(ccpool_parse_workers("--workers="), -1);
}

}  // namespace
