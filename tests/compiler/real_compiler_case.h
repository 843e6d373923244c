// The fixture shared by the real-compiler suites (cc_correctness_test.cpp,
// cc_lookups_test.cpp): parameterised by "g++" or "clang++", a scratch dir,
// a planner and an in-memory store, and check(): through the cache, then the
// same command directly, and the output bytes compared.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "compiler/planner.h"
#include "tests/compiler/executor.h"
#include "tests/support/scratch.h"

namespace ccpool::compiler::testing {

class RealCompilerCase : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (::access(compiler().c_str(), X_OK) != 0) {
      FAIL() << compiler() << " is missing: run scripts/setup-deps.sh";
    }
    dir = ::ccpool::testing::scratch_dir();
  }
  std::string compiler() const { return "/usr/bin/" + GetParam(); }
  bool gcc() const { return GetParam() == "g++"; }

  Request request(std::vector<std::string> args, const std::string& cwd = "") {
    Request r;
    r.program = compiler();
    r.argv = {GetParam()};
    r.argv.insert(r.argv.end(), args.begin(), args.end());
    r.cwd = cwd.empty() ? dir : cwd;
    r.env = base_env();
    return r;
  }

  // Through the cache, then directly into `ref_out`: same exit code and
  // output bytes.
  Outcome check(const Request& r, const std::string& out, const std::string& ref_out = "ref.o") {
    Outcome o = execute(planner, store, r);
    EXPECT_EQ(o.exit_code, 0) << o.stderr_text;
    std::vector<std::string> direct = r.argv;
    for (auto& a : direct) {
      if (a == out) a = ref_out;
    }
    direct[0] = r.program;
    EXPECT_EQ(run_direct(direct, r.cwd, r.env), 0);
    EXPECT_EQ(read_text(r.cwd + "/" + out), read_text(r.cwd + "/" + ref_out))
        << "bytes differ for " << out;
    return o;
  }

  Planner planner;
  MemoryStore store;
  std::string dir;
};

}  // namespace ccpool::compiler::testing
