#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "base/fs.h"
#include "tests/support/scratch.h"

namespace ccpool::testing {
namespace {

std::string g_current;

std::string sanitize(std::string name) {
  for (char& c : name) {
    if (c == '/' || c == ' ') c = '_';
  }
  return name;
}

class ScratchListener : public ::testing::EmptyTestEventListener {
  void OnTestStart(const ::testing::TestInfo&) override { g_current.clear(); }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (g_current.empty()) return;
    if (info.result()->Passed()) {
      remove_tree(g_current);
    } else {
      std::fprintf(stderr, "scratch directory kept: %s\n", g_current.c_str());
    }
    g_current.clear();
  }
};

}  // namespace

const std::string& scratch_dir() {
  if (!g_current.empty()) return g_current;
  const char* root_env = std::getenv("CCPOOL_TEST_TMP");
  std::string root = root_env ? root_env : "/tmp/ccpool-tests";
  std::filesystem::create_directories(root);
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name =
      info ? sanitize(std::string(info->test_suite_name()) + "." + info->name()) : "unnamed";
  auto dir = make_temp_dir(root, name + ".");
  if (!dir) {
    std::fprintf(stderr, "cannot create scratch dir: %s\n", dir.error().message.c_str());
    std::abort();
  }
  g_current = *dir;
  return g_current;
}

std::string build_binary(const std::string& name) {
  return std::string(CCPOOL_BIN_DIR) + "/" + name;
}

}  // namespace ccpool::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::UnitTest::GetInstance()->listeners().Append(new ccpool::testing::ScratchListener);
  return RUN_ALL_TESTS();
}
