// compiler/bounded.h with real g++: on a thread that must not wait, the
// planner declines instead of running a helper, reading a large file, planning
// an archiver, or validating an entry the validation memo does not vouch for
// whole; without the scope the same request is planned and looked up as ever.
#include "compiler/bounded.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "compiler/planner.h"
#include "tests/compiler/executor.h"
#include "tests/support/scratch.h"

namespace ccpool::compiler::testing {
namespace {

class BoundedPlanner : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access("/usr/bin/g++", X_OK) != 0) FAIL() << "g++ is missing: run scripts/setup-deps.sh";
    dir = ::ccpool::testing::scratch_dir();
  }
  Request request(const std::string& program, std::vector<std::string> argv) {
    Request r;
    r.program = program;
    r.argv = std::move(argv);
    r.cwd = dir;
    r.env = base_env();
    return r;
  }
  Request gxx() { return request("/usr/bin/g++", {"g++", "-O2", "-c", "k.cpp", "-o", "k.o"}); }
  // plan() under a BoundedScope: whether it declined, and the plan's kind.
  std::pair<bool, PlanKind> plan_bounded(Planner& planner, const Request& r) {
    BoundedScope scope;
    Result<Plan> plan = planner.plan(r, dir + "/work");
    return {scope.declined(), plan ? plan->kind : PlanKind::kPassthrough};
  }
  // plan() then lookup() under a BoundedScope: whether it declined, and the key.
  std::pair<bool, std::optional<Digest>> lookup_bounded(Planner& planner, const Request& r) {
    BoundedScope scope;
    Result<Plan> plan = planner.plan(r, dir + "/work");
    if (scope.declined() || !plan) return {true, std::nullopt};
    Result<std::optional<Digest>> key = planner.lookup(*plan, store.storage());
    return {scope.declined(), key ? *key : std::nullopt};
  }

  std::string dir;
  MemoryStore store;
};

TEST_F(BoundedPlanner, AFreshPlannerDeclinesRatherThanAskTheCompilerWhatItIs) {
  write_text(dir + "/k.cpp", "int k() { return 1; }\n");
  Planner planner;
  EXPECT_EQ(plan_bounded(planner, gxx()).first, true);  // `g++ --version` would run
  Result<Plan> plan = planner.plan(gxx(), dir + "/work");
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->kind, PlanKind::kCompiler);
  // Known now: planned under the scope too, the same way.
  EXPECT_EQ(plan_bounded(planner, gxx()), std::make_pair(false, PlanKind::kCompiler));
  // -march=native needs a probe of what the compiler makes of it: declined
  // until a plan without the scope ran it.
  Request native =
      request("/usr/bin/g++", {"g++", "-O2", "-march=native", "-c", "k.cpp", "-o", "k.o"});
  EXPECT_EQ(plan_bounded(planner, native).first, true);
  plan = planner.plan(native, dir + "/work");
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->kind, PlanKind::kCompiler);
  EXPECT_EQ(plan_bounded(planner, native), std::make_pair(false, PlanKind::kCompiler));
  EXPECT_FALSE(bounded::active());
}

TEST_F(BoundedPlanner, AnArchiverIsDeclined) {
  write_text(dir + "/a.o", "not an object\n");
  Planner planner;
  EXPECT_EQ(plan_bounded(planner, request("/usr/bin/ar", {"ar", "qc", "lib.a", "a.o"})).first,
            true);
}

TEST_F(BoundedPlanner, ASourceOverTheReadBoundIsDeclined) {
  Planner planner;
  write_text(dir + "/k.cpp", "int k() { return 1; }\n");
  ASSERT_TRUE(planner.plan(gxx(), dir + "/work").has_value());  // the compiler known
  std::string big = "int k() { return 1; }\n//" + std::string(kBoundedReadBytes, 'x') + "\n";
  write_text(dir + "/k.cpp", big);
  EXPECT_EQ(plan_bounded(planner, gxx()).first, true);
  Result<Plan> plan = planner.plan(gxx(), dir + "/work");  // read without the scope
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->kind, PlanKind::kCompiler);
}

// The lookup under the scope takes an entry only when the memo vouches for it
// whole; after a change, it declines and the full lookup misses.
TEST_F(BoundedPlanner, LookupTakesOnlyAnEntryTheMemoVouchesForWhole) {
  PlannerOptions options;
  options.validation_memo = true;
  Planner planner(options);
  ASSERT_TRUE(planner.has_validation_memo());
  write_text(dir + "/h.h", "#define V 1\n");
  write_text(dir + "/k.cpp", "#include \"h.h\"\nint k() { return V; }\n");
  Outcome miss = execute(planner, store, gxx());
  ASSERT_TRUE(miss.stored) << miss.why_not;
  // Hits validate their answers one by one (the memo learned the miss's
  // record) and, served by the memo throughout, are then vouched for whole.
  // Another test's files under the shared test directory move the memo
  // too (CI runs two tests at once): tries for up to 10 s, not a count.
  std::pair<bool, std::optional<Digest>> taken{true, std::nullopt};
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (taken.first && std::chrono::steady_clock::now() < deadline) {
    EXPECT_TRUE(execute(planner, store, gxx()).hit);
    taken = lookup_bounded(planner, gxx());
  }
  EXPECT_FALSE(taken.first);
  ASSERT_TRUE(taken.second.has_value());
  EXPECT_EQ(*taken.second, miss.conclusion.finished.result_key);
  EXPECT_GT(planner.counters().memo_sets_served, 0u);

  // An editor's save: a new file renamed over the header, which never opens
  // the inode the memo watches. The whole entry is no longer vouched for.
  write_text(dir + "/h.tmp", "#define V 2\n");
  ASSERT_EQ(::rename((dir + "/h.tmp").c_str(), (dir + "/h.h").c_str()), 0);
  std::pair<bool, std::optional<Digest>> after = lookup_bounded(planner, gxx());
  EXPECT_TRUE(after.first);
  EXPECT_FALSE(after.second.has_value());
  Outcome edited = execute(planner, store, gxx());
  EXPECT_FALSE(edited.hit);
  EXPECT_TRUE(edited.stored) << edited.why_not;
}

// A source written less than two seconds ago (its ctime, which nothing sets
// back) is one a stat cannot vouch for: the file hasher reads it again on
// every plan. Its digest comes from the memo instead, whose inode watch sees
// an edit within one timestamp tick; before, that read was an open of a file
// the memo keeps, by someone else as far as the memo could tell, and no
// entry with a fresh source was ever taken whole.
TEST_F(BoundedPlanner, AFreshSourceLetsTheEntryBeTakenWholeAndAnEditOfItIsSeen) {
  PlannerOptions options;
  options.validation_memo = true;
  Planner planner(options);
  ASSERT_TRUE(planner.has_validation_memo());
  const std::string source = dir + "/k.cpp";
  write_text(dir + "/h.h", "#define V 1\n");
  write_text(source, "#include \"h.h\"\nint k() { return V * 3; }\n");
  struct stat written {};
  ASSERT_EQ(::stat(source.c_str(), &written), 0);
  auto age_s = [&] {
    timespec now{};
    ::clock_gettime(CLOCK_REALTIME, &now);
    return static_cast<double>(now.tv_sec - written.st_ctim.tv_sec) +
           static_cast<double>(now.tv_nsec - written.st_ctim.tv_nsec) / 1e9;
  };
  Outcome miss = execute(planner, store, gxx());
  ASSERT_TRUE(miss.stored) << miss.why_not;
  std::pair<bool, std::optional<Digest>> taken{true, std::nullopt};
  while (taken.first && age_s() < 1.8) {  // inside the hasher's 2 s window
    EXPECT_TRUE(execute(planner, store, gxx()).hit);
    taken = lookup_bounded(planner, gxx());
  }
  ASSERT_FALSE(taken.first) << "no hit was taken whole while the source was fresh";
  ASSERT_TRUE(taken.second.has_value());
  EXPECT_EQ(*taken.second, miss.conclusion.finished.result_key);

  // The source edited in place within the same tick: same inode, same size,
  // its timestamps put back.
  int fd = ::open(source.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  const std::string edited = "#include \"h.h\"\nint k() { return V * 4; }\n";
  ASSERT_EQ(::pwrite(fd, edited.data(), edited.size(), 0), static_cast<ssize_t>(edited.size()));
  ::close(fd);
  const timespec times[2] = {written.st_atim, written.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, source.c_str(), times, 0), 0);
  std::pair<bool, std::optional<Digest>> after = lookup_bounded(planner, gxx());
  EXPECT_FALSE(after.second.has_value());
  Outcome fresh = execute(planner, store, gxx());
  EXPECT_FALSE(fresh.hit);
  ASSERT_TRUE(fresh.stored) << fresh.why_not;
  EXPECT_NE(fresh.conclusion.finished.result_key, miss.conclusion.finished.result_key);
}

// Answers the memo does not keep are asked with their own system calls on
// every hit: here clang's size-and-mtime checks of every input its PCH names
// ('m') and its listings of the directories where it looks for a GCC
// installation. Such an entry is never vouched for whole, so a touched header
// always reaches the check the compiler itself makes.
TEST_F(BoundedPlanner, AnEntryWithAnAnswerTheMemoCannotKeepIsNeverTakenWhole) {
  if (::access("/usr/bin/clang++", X_OK) != 0)
    FAIL() << "clang++ is missing: run scripts/setup-deps.sh";
  PlannerOptions options;
  options.validation_memo = true;
  Planner planner(options);
  write_text(dir + "/prefix.h", "inline double pv() { return 5; }\n");
  write_text(dir + "/k.cpp", "extern \"C\" double k(double x) { return x + pv(); }\n");
  ASSERT_EQ(run_direct({"/usr/bin/clang++", "-O2", "-fPIC", "-x", "c++-header", "prefix.h", "-o",
                        "prefix.h.pch"},
                       dir, base_env()),
            0);
  Request r = request("/usr/bin/clang++", {"clang++", "-O2", "-fPIC", "-include", "prefix.h", "-c",
                                           "k.cpp", "-o", "k.o"});
  Outcome miss = execute(planner, store, r);
  ASSERT_TRUE(miss.stored) << miss.why_not;
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(execute(planner, store, r).hit);
    EXPECT_TRUE(lookup_bounded(planner, r).first) << "taken whole on hit " << i;
  }
  EXPECT_EQ(planner.counters().memo_sets_served, 0u);
}

}  // namespace
}  // namespace ccpool::compiler::testing
