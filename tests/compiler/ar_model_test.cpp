// Static archives through the cache (compiler/ar_model.cpp) with the real GNU
// ar and ranlib: every archive served is byte for byte what the same command
// run directly in the same state writes, and every change such a run would
// see (a member's bytes, the archive it updates) is a miss.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "base/fs.h"
#include "tests/compiler/executor.h"
#include "tests/support/scratch.h"

namespace ccpool::compiler::testing {
namespace {

class StaticArchiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* tool : {"/usr/bin/ar", "/usr/bin/ranlib", "/usr/bin/g++"}) {
      if (::access(tool, X_OK) != 0) FAIL() << tool << " is missing: run scripts/setup-deps.sh";
    }
    dir = ::ccpool::testing::scratch_dir();
    object("a", 1);
    object("b", 2);
  }

  // An object defining f<name>() returning `value`, compiled directly.
  void object(const std::string& name, int value) {
    write_text(dir + "/" + name + ".cpp",
               "int f" + name + "() { return " + std::to_string(value) + "; }\n");
    ASSERT_EQ(run_direct({"/usr/bin/g++", "-O2", "-c", name + ".cpp", "-o", name + ".o"}, dir,
                         base_env()),
              0);
  }

  Request request(const std::string& tool, std::vector<std::string> args) {
    Request r;
    r.program = "/usr/bin/" + tool;
    r.argv = {tool};
    r.argv.insert(r.argv.end(), args.begin(), args.end());
    r.cwd = dir;
    r.env = base_env();
    return r;
  }

  // Through the cache; then the same command run directly, on `ref` in the
  // state the archive had before (absent, or a copy of it): same exit code,
  // same stderr, same bytes.
  Outcome same_as_direct(const Request& r, const std::string& archive = "lib.a") {
    std::string before;
    bool existed = std::filesystem::exists(dir + "/" + archive);
    if (existed) before = read_text(dir + "/" + archive);
    Outcome o = execute(planner, store, r);
    std::vector<std::string> direct = r.argv;
    direct[0] = r.program;
    for (std::string& arg : direct) {
      if (arg == archive) arg = "ref.a";
    }
    std::filesystem::remove(dir + "/ref.a");
    if (existed) write_text(dir + "/ref.a", before);
    std::string err, out;
    int rc = run_direct(direct, dir, r.env, &err, &out);
    EXPECT_EQ(o.exit_code, rc) << o.stderr_text;
    EXPECT_EQ(o.stderr_text, err);
    EXPECT_EQ(o.stdout_text, out);
    EXPECT_TRUE(read_text(dir + "/" + archive) == read_text(dir + "/ref.a"))
        << archive << " differs from a direct run";
    return o;
  }

  Planner planner;
  MemoryStore store;
  std::string dir;
};

// A member name of 16 characters or more goes through the long-name table
// ("//"), whose header fields are blank.
TEST_F(StaticArchiveTest, ANewArchiveIsStoredAndServedAsArWritesIt) {
  object("a_long_member_name", 5);
  auto r = request("ar", {"qc", "lib.a", "a.o", "b.o", "a_long_member_name.o"});
  Outcome first = same_as_direct(r);
  ASSERT_EQ(first.plan.kind, PlanKind::kCompiler) << first.plan.reason;
  EXPECT_TRUE(first.stored) << first.why_not;
  std::filesystem::remove(dir + "/lib.a");
  Outcome second = same_as_direct(r);
  EXPECT_TRUE(second.hit);
  EXPECT_EQ(store.executions, 1);
}

TEST_F(StaticArchiveTest, AChangedMemberMisses) {
  auto r = request("ar", {"qc", "lib.a", "a.o", "b.o"});
  EXPECT_TRUE(same_as_direct(r).stored);
  std::filesystem::remove(dir + "/lib.a");
  object("b", 3);  // the same name, other bytes
  Outcome changed = same_as_direct(r);
  EXPECT_FALSE(changed.hit) << "an archive of the old b.o was served";
  EXPECT_TRUE(changed.stored) << changed.why_not;
}

// `ar r` into an existing archive, then ranlib: the archive is an input, read
// from a copy made before the run; another archive's bytes are a miss.
TEST_F(StaticArchiveTest, AnExistingArchiveIsKeyedByItsBytes) {
  object("c", 4);
  EXPECT_TRUE(same_as_direct(request("ar", {"qc", "lib.a", "a.o"})).stored);
  std::string one = read_text(dir + "/lib.a");
  auto add = request("ar", {"rcs", "lib.a", "c.o"});
  Outcome first = same_as_direct(add);
  EXPECT_TRUE(first.stored) << first.why_not;
  EXPECT_FALSE(first.hit);
  write_text(dir + "/lib.a", one);
  EXPECT_TRUE(same_as_direct(add).hit);
  EXPECT_TRUE(same_as_direct(request("ar", {"qc", "other.a", "b.o"}), "other.a").stored);
  write_text(dir + "/lib.a", read_text(dir + "/other.a"));
  Outcome other = same_as_direct(add);
  EXPECT_FALSE(other.hit) << "c.o added to another archive was served";
  EXPECT_TRUE(other.stored) << other.why_not;
}

// GNU make's default ARFLAGS (rv): what ar prints per member is replayed.
TEST_F(StaticArchiveTest, VerboseOutputIsReplayedAsArPrintsIt) {
  auto create = request("ar", {"rcv", "lib.a", "a.o", "b.o"});
  Outcome first = same_as_direct(create);
  EXPECT_TRUE(first.stored) << first.why_not;
  EXPECT_EQ(first.stdout_text, "a - a.o\na - b.o\n");
  std::filesystem::remove(dir + "/lib.a");
  EXPECT_TRUE(same_as_direct(create).hit);
  auto replace = request("ar", {"rv", "lib.a", "b.o"});
  Outcome replaced = same_as_direct(replace);
  EXPECT_TRUE(replaced.stored) << replaced.why_not;
  EXPECT_EQ(replaced.stdout_text, "r - b.o\n");
}

TEST_F(StaticArchiveTest, RanlibIsServedOnTheSameArchive) {
  EXPECT_TRUE(same_as_direct(request("ar", {"qcS", "lib.a", "a.o", "b.o"})).stored);
  std::string unindexed = read_text(dir + "/lib.a");
  auto r = request("ranlib", {"lib.a"});
  Outcome first = same_as_direct(r);
  ASSERT_EQ(first.plan.kind, PlanKind::kCompiler) << first.plan.reason;
  EXPECT_TRUE(first.stored) << first.why_not;
  EXPECT_NE(read_text(dir + "/lib.a"), unindexed) << "ranlib added no index";
  write_text(dir + "/lib.a", unindexed);
  EXPECT_TRUE(same_as_direct(r).hit);
}

TEST_F(StaticArchiveTest, WhatIsNotOneArchiveFromFilesPassesThrough) {
  EXPECT_TRUE(same_as_direct(request("ar", {"qc", "lib.a", "a.o"})).stored);
  // A thin archive names its members relative to itself: never copied.
  ASSERT_EQ(run_direct({"/usr/bin/ar", "rcT", "thin.a", "a.o"}, dir, base_env()), 0);
  struct Case {
    std::string tool;
    std::vector<std::string> args;
    std::string code;
  };
  for (const Case& c : std::vector<Case>{
           {"ar", {"t", "lib.a"}, "ar_operation:t"},
           {"ar", {"x", "lib.a"}, "ar_operation:x"},
           {"ar", {"qcU", "u.a", "a.o"}, "ar_modifier:U"},
           {"ar", {"rcT", "thin.a", "a.o"}, "ar_modifier:T"},
           {"ar", {"rcu", "u.a", "a.o"}, "ar_modifier:u"},
           {"ar", {"--thin", "rc", "thin.a", "a.o"}, "ar_option:--thin"},
           {"ar", {"q", "new.a", "a.o"}, "ar_creates_without_c"},
           {"ar", {"qc", "x.a", "@list"}, "ar_option:@list"},
           {"ar", {"qc", "x.a", "x.a"}, "ar_archive_is_member"},
           {"ar", {"qc", "lib.a", "./lib.a"}, "ar_archive_is_member"},
           {"ar", {"rcs", "thin.a", "b.o"}, "ar_archive_not_plain"},
           {"ranlib", {"thin.a"}, "ar_archive_not_plain"},
           {"ranlib", {"-t", "lib.a"}, "ranlib_arguments"},
           {"ranlib", {"missing.a"}, "ranlib_no_archive"},
       }) {
    Result<Plan> plan = planner.plan(request(c.tool, c.args), dir + "/unused");
    ASSERT_TRUE(plan.has_value());
    EXPECT_EQ(plan->kind, PlanKind::kPassthrough) << c.tool << " " << c.args[0];
    EXPECT_EQ(plan->reason_code, c.code) << c.tool << " " << c.args[0] << ": " << plan->reason;
  }
}

// The key says the run started from no archive: one that appears meanwhile
// would have been appended to by a direct run.
TEST_F(StaticArchiveTest, AnArchiveAppearingDuringTheRunIsNotStored) {
  Outcome o = execute(planner, store, request("ar", {"qc", "lib.a", "a.o"}),
                      [&] { write_text(dir + "/lib.a", "!<arch>\n"); });
  EXPECT_FALSE(o.stored);
  EXPECT_EQ(o.why_not_code, "input_changed_during_compile") << o.why_not;
}

// The archive changes between the plan that keyed it and the copy the run
// starts from: the run must not start.
TEST_F(StaticArchiveTest, ASeedChangedSinceThePlanIsRefused) {
  EXPECT_TRUE(same_as_direct(request("ar", {"qc", "lib.a", "a.o"})).stored);
  std::string work = dir + "/work.seed";
  Result<Plan> plan = planner.plan(request("ranlib", {"lib.a"}), work);
  ASSERT_TRUE(plan.has_value());
  ASSERT_EQ(plan->seeds.size(), 1u) << plan->reason;
  std::filesystem::create_directories(work);
  write_text(dir + "/lib.a", read_text(dir + "/lib.a") + "x");
  std::string why = copy_seed_files(*plan);
  EXPECT_NE(why.find("changed since it was keyed"), std::string::npos) << why;
}

// A run whose archive carries a date is concluded as not stored.
TEST_F(StaticArchiveTest, AnArchiveWithADateIsNotStored) {
  Result<Plan> plan = planner.plan(request("ar", {"qc", "lib.a", "a.o"}), dir + "/work.date");
  ASSERT_TRUE(plan.has_value());
  ASSERT_EQ(plan->kind, PlanKind::kCompiler) << plan->reason;
  std::string header = "a.o/            1700000000  0     0     100644  0         `\n";
  ASSERT_EQ(header.size(), 60u);
  RunFacts run;
  run.started = std::chrono::system_clock::now();
  run.success = true;
  run.outputs = {{"out", "!<arch>\n" + header}};
  Conclusion c = planner.conclude(*plan, run, store.storage());
  EXPECT_FALSE(c.finished.store);
  EXPECT_EQ(c.finished.why_not_code, "archive_not_deterministic") << c.finished.why_not;
}

}  // namespace
}  // namespace ccpool::compiler::testing
