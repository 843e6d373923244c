// conclude_observed (compiler/observed.cpp) on synthetic records: the rules
// that decide, after a run, whether what the record says the run found still
// holds, spelled the ways a real record spells paths (absolute, relative to
// the cwd, repeated). The real compilers' records are exercised by
// cc_observed_test.cpp and cc_correctness_test.cpp.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "compiler/observed.h"
#include "tests/support/scratch.h"

namespace ccpool::compiler {
namespace {

namespace fs = std::filesystem;

class ObservedRecord : public ::testing::Test {
 protected:
  void SetUp() override {
    root = ::ccpool::testing::scratch_dir();  // removed when the test passes
    fs::create_directories(root + "/work/job");
    fs::create_directories(root + "/inc");
    fs::create_directories(root + "/sys");
    put("bin/cc", "image of cc");
    put("work/k.c", "int k;\n");
    put("sys/s.h", "int s;\n");
  }
  void put(const std::string& rel, const std::string& text) {
    fs::create_directories(fs::path(root + "/" + rel).parent_path());
    std::ofstream(root + "/" + rel) << text;
  }

  static TraceEvent ev(char op, int64_t a, int64_t b, std::string text, std::string text2 = "") {
    TraceEvent e;
    e.op = op;
    e.pid = 10;
    e.a = a;
    e.b = b;
    e.text = std::move(text);
    e.has_text2 = !text2.empty();
    e.text2 = std::move(text2);
    return e;
  }

  // The compiler's image started and read its source (relative to the cwd).
  std::vector<TraceEvent> run_of(std::vector<TraceEvent> more) {
    std::vector<TraceEvent> events = {ev('S', 1, 0, root + "/bin/cc"), ev('O', 0, 0, "k.c")};
    events.insert(events.end(), more.begin(), more.end());
    return events;
  }

  Observation conclude(const std::vector<TraceEvent>& events) {
    ObservedRun run;
    run.cwd = root + "/work";
    run.work_dir = root + "/work/job";
    // Every file here is older than the run's start: nothing "changed during it".
    run.start_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count() +
                   10'000'000'000;
    return conclude_observed(hasher, listings, run, events);
  }

  std::string root;
  FileHasher hasher;
  DirListings listings;
};

// A file the run read and later wrote (outside its work dir) is refused,
// whichever way each lookup spelled its path.
TEST_F(ObservedRecord, AFileReadThenWrittenIsRefusedHoweverItsPathIsSpelled) {
  put("work/gen.h", "int g;\n");
  Observation relative_read =
      conclude(run_of({ev('O', 0, 0, "gen.h"), ev('W', 0, 65, root + "/work/gen.h")}));
  EXPECT_EQ(relative_read.why.code, "input_overwritten") << relative_read.why.text;
  Observation relative_write =
      conclude(run_of({ev('O', 0, 0, root + "/work/gen.h"), ev('W', 0, 65, "gen.h")}));
  EXPECT_EQ(relative_write.why.code, "input_overwritten") << relative_write.why.text;
  // Written first, then read back: the run's own file, no input.
  Observation own = conclude(run_of({ev('W', 0, 65, "gen.h"), ev('O', 0, 0, "gen.h")}));
  EXPECT_TRUE(own.why.empty()) << own.why.code << ": " << own.why.text;
  for (const auto& [path, digest] : own.entry.files) EXPECT_NE(path, "gen.h");
}

// The absent paths are kept once each, sorted, and checked after the run
// through their directories: one that exists by then refuses the run.
TEST_F(ObservedRecord, AbsentPathsAreKeptSortedOnceAndRecheckedAfterTheRun) {
  std::vector<TraceEvent> events =
      run_of({ev('O', ENOENT, 0, root + "/inc/z.h"), ev('O', ENOENT, 0, "a.h"),
              ev('T', ENOENT, 8, root + "/inc/b.h"), ev('O', ENOENT, 0, root + "/inc/z.h"),
              ev('A', ENOENT, 4, root + "/sys/b.h"), ev('K', ENOENT, 0, "a.h"),
              ev('O', 0, 0, root + "/sys/s.h")});
  Observation ok = conclude(events);
  ASSERT_TRUE(ok.why.empty()) << ok.why.code << ": " << ok.why.text;
  std::vector<std::string> want = {root + "/inc/b.h", root + "/inc/z.h", root + "/sys/b.h", "a.h"};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(ok.entry.absent, want);

  for (const std::string& appears : {std::string("work/a.h"), std::string("inc/z.h")}) {
    put(appears, "int late;\n");
    Observation late = conclude(events);
    EXPECT_EQ(late.why.code, "input_changed_during_compile") << appears;
    EXPECT_NE(late.why.text.find(root + "/" + appears), std::string::npos) << late.why.text;
    fs::remove(root + "/" + appears);
  }
}

// A realpath or stat answer is asked again after the run, through links as
// realpath(3) resolves them: one that no longer holds refuses the run, one
// that holds is kept with its recorded answer.
TEST_F(ObservedRecord, RealpathAndStatAnswersAreAskedAgainThroughLinks) {
  put("v1/x.h", "int x;\n");
  put("v2/x.h", "int x2;\n");
  fs::create_directory_symlink(root + "/v1", root + "/cur");
  fs::create_directory_symlink("../cur", root + "/work/link");  // relative, through another link
  const std::string now_target = "=" + root + "/v1/x.h";
  std::vector<TraceEvent> holds =
      run_of({ev('K', 0, 0, "link/x.h", root + "/v1/x.h"), ev('T', 0, 4, root + "/cur"),
              ev('T', 0, 16 + 10, root + "/cur")});
  Observation ok = conclude(holds);
  ASSERT_TRUE(ok.why.empty()) << ok.why.code << ": " << ok.why.text;
  auto answer_of = [&](char kind, const std::string& path) {
    for (const ManifestCheck& c : ok.entry.checks) {
      if (c.kind == kind && c.path == path) return c.answer;
    }
    return std::string("(none)");
  };
  EXPECT_EQ(answer_of('k', "link/x.h"), now_target);
  EXPECT_EQ(answer_of('t', root + "/cur"), "4");
  EXPECT_EQ(answer_of('l', root + "/cur"), "10");

  Observation moved = conclude(run_of({ev('K', 0, 0, "link/x.h", root + "/v2/x.h")}));
  EXPECT_EQ(moved.why.code, "input_changed_during_compile");
  EXPECT_NE(moved.why.text.find("link/x.h"), std::string::npos) << moved.why.text;
  Observation not_a_file = conclude(run_of({ev('T', 0, 8, root + "/cur")}));
  EXPECT_EQ(not_a_file.why.code, "input_changed_during_compile");
  Observation not_a_link = conclude(run_of({ev('T', 0, 16 + 10, root + "/v1")}));
  EXPECT_EQ(not_a_link.why.code, "input_changed_during_compile");
}

// A clang PCH is told by its first bytes ("CPCH"); the run's conclusion reads
// those, not the whole file: Inductor's precompiled header is 150 MB, read by
// every compile of a graph. Concluded in a child whose address space cannot
// hold the file (a read of it whole fails there), with the stats of the
// process that read it kept as size-and-mtime checks, as clang checks them.
TEST_F(ObservedRecord, APchIsToldByItsHeadWithoutReadingItWhole) {
  constexpr off_t kPchBytes = off_t{1} << 29;  // sparse: no disk used
  put("work/p.h.pch", "CPCH");
  fs::resize_file(root + "/work/p.h.pch", kPchBytes);
  std::vector<TraceEvent> events =
      run_of({ev('O', 0, 0, "p.h.pch"), ev('T', 0, S_IFREG >> 12, root + "/sys/s.h")});
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    long pages = 0;
    std::ifstream("/proc/self/statm") >> pages;
    rlim_t room = static_cast<rlim_t>(pages) * static_cast<rlim_t>(::sysconf(_SC_PAGESIZE)) +
                  (rlim_t{256} << 20);
    struct rlimit limit = {room, room};
    if (::setrlimit(RLIMIT_AS, &limit) != 0) ::_exit(3);
    int code = 2;
    try {
      Observation ok = conclude(events);
      bool kept = std::any_of(
          ok.entry.checks.begin(), ok.entry.checks.end(),
          [&](const ManifestCheck& c) { return c.kind == 'm' && c.path == root + "/sys/s.h"; });
      bool hashed = std::any_of(ok.entry.files.begin(), ok.entry.files.end(),
                                [](const auto& f) { return f.first == "p.h.pch"; });
      code = ok.why.empty() && hashed && kept ? 0 : 1;
    } catch (...) {  // std::bad_alloc: the file was read whole
    }
    ::_exit(code);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "1: concluded without the PCH's checks; 2: it ran out of memory (read the "
         "PCH whole); 3: setrlimit failed";
}

}  // namespace
}  // namespace ccpool::compiler
