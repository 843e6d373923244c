// Issue 22: the key is what the compiler read. Each case is one way a model
// of gcc's and clang's reads went wrong (a false hit before the record, see
// the commit that added the case), checked with the real compilers: every
// result is compared byte for byte with a direct compile of the same
// command in the same state, and every change a direct compile would see is
// a miss.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "base/fs.h"
#include "tests/compiler/real_compiler_case.h"

namespace ccpool::compiler::testing {
namespace {

class CcObserved : public RealCompilerCase {
 protected:
  // Through the cache, then the same command directly in the same state:
  // same exit code, same stderr, and the same bytes for every output the
  // request delivered (object and dependency file), read before the direct
  // compile writes the same paths again.
  Outcome same_as_direct(const Request& r, const std::vector<std::string>& outputs) {
    Outcome o = execute(planner, store, r);
    std::map<std::string, std::string> got;
    for (const std::string& path : outputs) {
      got[path] = read_text(r.cwd + "/" + path);
      std::filesystem::remove(r.cwd + "/" + path);
    }
    std::vector<std::string> direct = r.argv;
    direct[0] = r.program;
    std::string err;
    int rc = run_direct(direct, r.cwd, r.env, &err);
    EXPECT_EQ(o.exit_code, rc) << o.stderr_text;
    EXPECT_EQ(o.stderr_text, err);
    for (const std::string& path : outputs) {
      if (rc != 0) break;
      std::string want = read_text(r.cwd + "/" + path);
      EXPECT_TRUE(got[path] == want) << path << " differs from a direct compile ("
                                     << got[path].size() << " vs " << want.size() << " bytes)";
    }
    return o;
  }
  Outcome same_as_direct(const Request& r) { return same_as_direct(r, {"k.o"}); }
};

class GccObserved : public CcObserved {};    // what only gcc does
class ClangObserved : public CcObserved {};  // what only clang does

// gcc and clang evaluate a __has_include that a macro expands where the
// macro is used: a quote probe then looks in the directory of the file that
// uses it, not of the one that defines it.
TEST_P(CcObserved, HasIncludeInAMacroIsEvaluatedWhereUsed) {
  write_text(dir + "/inc/cfg.h", "#define HAVE_LOCAL __has_include(\"local.h\")\n");
  write_text(dir + "/src/k.cpp",
             "#include <cfg.h>\n#if HAVE_LOCAL\n#define V 2\n#else\n#define V 1\n#endif\n"
             "int f() { return V; }\n");
  auto r = request({"-c", "src/k.cpp", "-Iinc", "-o", "k.o"});
  Outcome first = same_as_direct(r);
  ASSERT_EQ(first.plan.kind, PlanKind::kCompiler) << first.plan.reason;
  EXPECT_TRUE(first.stored) << first.why_not;
  EXPECT_TRUE(same_as_direct(r).hit);
  write_text(dir + "/src/local.h", "#define V 2\n");
  Outcome flipped = same_as_direct(r);
  EXPECT_FALSE(flipped.hit) << "a header appearing beside the macro's user was ignored";
  EXPECT_TRUE(flipped.stored) << flipped.why_not;
}

// Issue 29 (a): a quote probe looks in the directory of the file holding it
// (src/), here no -I directory at all.
TEST_P(CcObserved, QuoteProbeLooksInTheProbingFilesDirectory) {
  write_text(dir + "/src/k.cpp",
             "#if __has_include(\"config.h\")\n#define V 3\n#else\n#define V 1\n#endif\n"
             "int f() { return V; }\n");
  auto r = request({"-c", "src/k.cpp", "-o", "k.o"});
  EXPECT_TRUE(same_as_direct(r).stored);
  EXPECT_TRUE(same_as_direct(r).hit);
  write_text(dir + "/src/config.h", "#define V 3\n");
  EXPECT_FALSE(same_as_direct(r).hit);
  EXPECT_EQ(store.executions, 2);
}

// A PCH rebuilt from other text (same header names, so the -E text and the
// .d are unchanged) changes the object: its content is what was read.
TEST_P(GccObserved, RebuiltPchMisses) {
  write_text(dir + "/prefix.h", "#define V 1\n");
  write_text(dir + "/a.h", "#define V 5\n");
  write_text(dir + "/b.h", "#define V 9\n");
  write_text(
      dir + "/k.cpp",
      "#define PROBE <nothing_zz.h>\n#if __has_include(PROBE)\n#endif\nint f() { return V; }\n");
  auto build_pch = [&](const char* from) {
    ASSERT_EQ(
        run_direct({compiler(), "-x", "c++-header", from, "-o", "prefix.h.gch"}, dir, base_env()),
        0);
  };
  build_pch("a.h");
  auto r = request({"-c", "-include", "prefix.h", "k.cpp", "-o", "k.o"});
  EXPECT_TRUE(same_as_direct(r).stored);
  EXPECT_TRUE(same_as_direct(r).hit);
  build_pch("b.h");
  Outcome rebuilt = same_as_direct(r);
  EXPECT_FALSE(rebuilt.hit) << "a rebuilt .gch was served from the store";
}

// The libc call that tells a time macro from gcc's start-up clock reads:
// localtime() (both compilers, first expansion of __DATE__/__TIME__, and
// __TIMESTAMP__), never called by a compile without one.
TEST_P(CcObserved, TimeMacrosAreSeenAsLocaltime) {
  write_text(dir + "/plain.cpp", "int f() { return 1; }\n");
  Outcome plain =
      execute(planner, store, request({"-c", "plain.cpp", "-g", "-O2", "-o", "plain.o"}));
  EXPECT_TRUE(plain.stored) << plain.why_not;
  EXPECT_EQ(plain.trace.find("\nC "), std::string::npos)
      << "a compile without time macros made a date";
  write_text(dir + "/cat.h", "#define CAT(a, b) a##b\n#define TI CAT(__TI, ME__)\n");
  write_text(dir + "/t.cpp", "#include \"cat.h\"\nconst char* t() { return TI; }\n");
  Outcome pasted = execute(planner, store, request({"-c", "t.cpp", "-o", "t.o"}));
  EXPECT_NE(pasted.trace.find(" 9:localtime\n"), std::string::npos) << pasted.trace.substr(0, 2000);
  EXPECT_FALSE(pasted.stored);
  EXPECT_EQ(pasted.why_not_code, "time_macro") << pasted.why_not;
  write_text(dir + "/s.cpp", "const char* s() { return __TIMESTAMP__; }\n");
  Outcome stamp = execute(planner, store, request({"-c", "s.cpp", "-o", "s.o"}));
  EXPECT_FALSE(stamp.stored);
  EXPECT_EQ(stamp.why_not_code, "time_macro") << stamp.why_not;
}

// -fdirectives-only: macros are not expanded when preprocessing alone, so a
// preprocessor-mode key never saw the pasted __TIME__ the compile expands.
TEST_P(GccObserved, PastedTimeUnderDirectivesOnlyIsNotStored) {
  write_text(
      dir + "/t.cpp",
      "#define CAT(a, b) a##b\n#define PROBE <nothing_zz.h>\n#if __has_include(PROBE)\n#endif\n"
      "const char* t() { return CAT(__TI, ME__); }\n");
  auto r = request({"-c", "-fdirectives-only", "t.cpp", "-o", "t.o"});
  for (int i = 0; i < 3; ++i) {
    Outcome o = execute(planner, store, r);
    EXPECT_FALSE(o.hit);
    EXPECT_FALSE(o.stored) << o.why_not;
  }
}

// gcc and clang write $PWD as DW_AT_comp_dir when it names the cwd: two
// requests from one cwd with different PWD values get different objects.
TEST_P(CcObserved, DebugInfoNamesPwd) {
  write_text(dir + "/real/k.cpp", "int f() { return 1; }\n");
  std::filesystem::create_directory_symlink(dir + "/real", dir + "/link");
  Request r = request({"-c", "-g", "k.cpp", "-o", "k.o"}, dir + "/real");
  r.env.push_back("PWD=" + dir + "/real");
  EXPECT_TRUE(same_as_direct(r).stored);
  EXPECT_TRUE(same_as_direct(r).hit);
  Request via_link = r;
  via_link.env.back() = "PWD=" + dir + "/link";
  Outcome o = same_as_direct(via_link);
  EXPECT_FALSE(o.hit) << "the object of another $PWD was served";
}

// gcc writes a system header by the path it found it through (a symlinked
// directory resolved when shorter): repointing the link changes the .d and
// the debug info although every header's content is the same.
TEST_P(CcObserved, SymlinkedSystemDirectoryIsResolvedAsTheCompilerDid) {
  std::string longdir = dir + "/a_rather_long_directory_name_to_hold_the_link/and_one_more_level";
  std::filesystem::create_directories(longdir);
  write_text(dir + "/s1/h.h", "#define V 1\n");
  write_text(dir + "/s2/h.h", "#define V 1\n");
  std::filesystem::create_directory_symlink(dir + "/s1", longdir + "/sys");
  write_text(dir + "/k.cpp", "#include <h.h>\nint f() { return V; }\n");
  auto r = request(
      {"-c", "-g", "-MD", "-MF", "k.d", "-isystem", longdir + "/sys", "k.cpp", "-o", "k.o"});
  std::vector<std::string> outputs = {"k.o", "k.d"};
  EXPECT_TRUE(same_as_direct(r, outputs).stored);
  EXPECT_TRUE(same_as_direct(r, outputs).hit);
  std::string before = read_text(dir + "/k.d");
  std::filesystem::remove(longdir + "/sys");
  std::filesystem::create_directory_symlink(dir + "/s2", longdir + "/sys");
  Outcome o = same_as_direct(r, outputs);
  if (read_text(dir + "/k.d") != before)
    EXPECT_FALSE(o.hit) << "a .d naming the old target was served";
}

// Programs the driver finds on its own (-B, PATH) are what they are: a
// changed assembler under -B is a miss, not the object of the old one.
TEST_P(CcObserved, ProgramsFoundThroughBAreKeyedByContent) {
  write_text(dir + "/k.cpp", "int f() { return 1; }\n");
  write_text(dir + "/tools/as", "#!/bin/sh\nexec as \"$@\"\n");
  ::chmod((dir + "/tools/as").c_str(), 0755);
  std::vector<std::string> args = {"-c", "-Btools/", "k.cpp", "-o", "k.o"};
  if (!gcc()) args.insert(args.begin(), "-fno-integrated-as");
  auto r = request(args);
  EXPECT_TRUE(same_as_direct(r).stored);
  EXPECT_TRUE(same_as_direct(r).hit);
  write_text(dir + "/tools/as", "#!/bin/sh\nexec as --defsym CCPOOL_MARK=1 \"$@\"\n");
  Outcome o = same_as_direct(r);
  EXPECT_FALSE(o.hit) << "the old assembler's object was served";
  EXPECT_TRUE(o.stored) << o.why_not;
}

// gcc reads a `specs` file from a -B directory when one exists.
TEST_P(GccObserved, SpecsFileAppearingUnderBMisses) {
  write_text(dir + "/k.cpp", "#ifndef SPECV\n#define SPECV 1\n#endif\nint f() { return SPECV; }\n");
  std::filesystem::create_directories(dir + "/tools");
  auto r = request({"-c", "-Btools/", "k.cpp", "-o", "k.o"});
  EXPECT_TRUE(same_as_direct(r).stored);
  EXPECT_TRUE(same_as_direct(r).hit);
  write_text(dir + "/tools/specs",
             "*cpp:\n-DSPECV=2 %{posix:-D_POSIX_SOURCE} %{pthread:-D_REENTRANT}\n\n");
  EXPECT_FALSE(same_as_direct(r).hit);
}

// .incbin is found because the assembler opens the file, however the
// directive is spelled (string pasting defeats any text match).
TEST_P(CcObserved, IncbinIsFoundByObservation) {
  write_text(dir + "/f.bin", "AAAA");
  write_text(dir + "/k.cpp",
             "asm(\".section .rodata\\n.globl blob\\nblob: .in\" \"cbin \\\"f.bin\\\"\\n.text\");\n"
             "int f() { return 1; }\n");
  auto r = request({"-c", "k.cpp", "-o", "k.o"});
  EXPECT_TRUE(same_as_direct(r).stored);
  EXPECT_TRUE(same_as_direct(r).hit);
  write_text(dir + "/f.bin", "BBBB");
  EXPECT_FALSE(same_as_direct(r).hit) << "the object of the old f.bin was served";
}

// clang refuses a PCH whose inputs' mtimes changed; a cached compile must
// fail the same way rather than serve the old object.
TEST_P(ClangObserved, ClangStalePchFailsLikeTheCompiler) {
  write_text(dir + "/prefix.h", "inline int pv() { return 5; }\n");
  write_text(dir + "/k.cpp", "int f() { return pv(); }\n");
  ASSERT_EQ(run_direct({compiler(), "-x", "c++-header", "prefix.h", "-o", "prefix.h.pch"}, dir,
                       base_env()),
            0);
  auto r = request({"-c", "-include", "prefix.h", "k.cpp", "-o", "k.o"});
  EXPECT_TRUE(same_as_direct(r).stored);
  EXPECT_TRUE(same_as_direct(r).hit);
  struct timespec times[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
  ::sleep(1);
  ASSERT_EQ(::utimensat(AT_FDCWD, (dir + "/prefix.h").c_str(), times, 0), 0);
  Outcome stale = same_as_direct(r);
  EXPECT_FALSE(stale.hit);
  EXPECT_NE(stale.exit_code, 0) << "clang fails on a stale PCH; the cache must too";
}

// Every variable the compiler reads is keyed, not only a list of known
// ones: GCC_EXTRA_DIAGNOSTIC_OUTPUT and CC_PRINT_HEADERS change stderr.
TEST_P(CcObserved, EnvironmentTheCompilerReadsIsKeyed) {
  write_text(dir + "/k.c", "#include <stdio.h>\nint main(void) { printf(\"x\"); return 0; }\n");
  write_text(dir + "/w.c", "int main(void) { printf(\"x\"); return 0; }\n");
  std::string cc = gcc() ? "gcc" : "clang";
  Request r;
  r.program = "/usr/bin/" + cc;
  r.argv = {cc, "-c", gcc() ? "w.c" : "k.c", "-o", "k.o"};
  r.cwd = dir;
  r.env = base_env();
  same_as_direct(r);
  EXPECT_TRUE(same_as_direct(r).hit);
  r.env.push_back(gcc() ? "GCC_EXTRA_DIAGNOSTIC_OUTPUT=fixits-v2" : "CC_PRINT_HEADERS=1");
  Outcome o = same_as_direct(r);
  EXPECT_FALSE(o.hit) << "stderr of another environment was replayed";
}

// Dependency files are the compiler's own, for a second requester too
// (system headers as the compiler classifies them: -iwithprefix, --sysroot).
TEST_P(CcObserved, MmdDependencyFilesAreTheCompilersOwn) {
  write_text(dir + "/pre/inc/w.h", "#define W 1\n");
  write_text(dir + "/sr/usr/include/s.h", "#define S 2\n");
  write_text(dir + "/user/u.h", "#define U 3\n");
  write_text(dir + "/k.cpp",
             "#include <w.h>\n#include <s.h>\n#include \"u.h\"\nint f() { return W + S + U; }\n");
  std::vector<std::vector<std::string>> variants = {
      {"-iprefix", dir + "/pre/", "-iwithprefix", "inc", "-isystem", "sr/usr/include"},
      {"--sysroot=" + dir + "/sr", "-isystem", "=/usr/include", "-Ipre/inc"},
      {"-nostdinc", "-isystem", "sr/usr/include", "-Ipre/inc"}};
  int n = 0;
  for (const auto& extra : variants) {
    std::string d = "k" + std::to_string(n++) + ".d";
    std::vector<std::string> args = {"-c", "k.cpp", "-Iuser", "-MMD", "-MF", d, "-o", "k.o"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<std::string> outputs = {"k.o", d};
    Outcome first = same_as_direct(request(args), outputs);
    EXPECT_TRUE(first.stored) << extra[0] << ": " << first.why_not_code << " " << first.why_not;
    std::filesystem::remove(dir + "/" + d);
    EXPECT_TRUE(same_as_direct(request(args), outputs).hit);
  }
}

// Issue 29 (b): two -o names share one store; each requester's .d names its
// own target, byte for byte as a direct compile writes it.
TEST_P(CcObserved, EachRequesterGetsItsOwnDependencyTarget) {
  write_text(dir + "/inc/h.h", "#define V 1\n");
  write_text(dir + "/k.cpp", "#include <h.h>\nint f() { return V; }\n");
  for (const char* name : {"a", "b", "a"}) {
    std::string o = std::string(name) + ".o", d = std::string(name) + ".d";
    auto r = request({"-c", "k.cpp", "-Iinc", "-MD", "-o", o});
    same_as_direct(r, {o, d});
    EXPECT_NE(read_text(dir + "/" + d).find(o + ":"), std::string::npos)
        << read_text(dir + "/" + d);
  }
}

// Issue 29 (c): a joiner is handed the leader's run only when its own view
// validates against what the run read; two directories with different
// headers get each their own object.
TEST_P(CcObserved, JoinerTakesTheLeadersRunOnlyWhenItsViewValidates) {
  for (const char* d : {"x", "y", "z"})
    write_text(dir + "/" + d + "/k.cpp", "#include \"h.h\"\nint f() { return V; }\n");
  write_text(dir + "/x/h.h", "#define V 1\n");
  write_text(dir + "/y/h.h", "#define V 2\n");
  write_text(dir + "/z/h.h", "#define V 1\n");
  auto rx = request({"-c", "k.cpp", "-o", "k.o"}, dir + "/x");
  Outcome leader = same_as_direct(rx);
  ASSERT_TRUE(leader.conclusion.validated) << leader.why_not;
  Result<Plan> py = planner.plan(request({"-c", "k.cpp", "-o", "k.o"}, dir + "/y"), dir + "/wy");
  Result<Plan> pz = planner.plan(request({"-c", "k.cpp", "-o", "k.o"}, dir + "/z"), dir + "/wz");
  ASSERT_TRUE(py && pz);
  ASSERT_EQ(py->flight_key, leader.plan.flight_key);  // they would join
  EXPECT_FALSE(planner.accepts(*py, leader.conclusion)) << "y's h.h differs: it must run its own";
  EXPECT_TRUE(planner.accepts(*pz, leader.conclusion));
  // And what z would be handed is what z compiles itself.
  ASSERT_EQ(run_direct({compiler(), "-c", "k.cpp", "-o", "k.o"}, dir + "/z", base_env()), 0);
  EXPECT_EQ(read_text(dir + "/z/k.o"), read_text(dir + "/x/k.o"));
}

INSTANTIATE_TEST_SUITE_P(Gcc, GccObserved, ::testing::Values("g++"),
                         [](const auto&) { return std::string("gcc"); });
INSTANTIATE_TEST_SUITE_P(Clang, ClangObserved, ::testing::Values("clang++"),
                         [](const auto&) { return std::string("clang"); });
INSTANTIATE_TEST_SUITE_P(Compilers, CcObserved, ::testing::Values("g++", "clang++"),
                         [](const auto& info) {
                           return info.param == "g++" ? std::string("gcc") : std::string("clang");
                         });

}  // namespace
}  // namespace ccpool::compiler::testing
