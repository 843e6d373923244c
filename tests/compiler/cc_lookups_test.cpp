// Lookups the .d file does not show (compiler/cc_lookups.cpp), with real g++
// and clang++: __has_include probes and precompiled headers. Every hit is
// byte-identical to a direct compile; every change a direct compile would
// see is a miss.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>

#include "base/fs.h"
#include "tests/compiler/real_compiler_case.h"

namespace ccpool::compiler::testing {
namespace {

class CcLookups : public RealCompilerCase {
 protected:
  // Loads a fresh copy of `so` and calls `double k(double)`.
  double call_k(const std::string& so, double x) {
    static std::atomic<int> copies{0};
    std::string copy = dir + "/load" + std::to_string(++copies) + ".so";
    std::filesystem::copy_file(so, copy);
    void* handle = ::dlopen(copy.c_str(), RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(handle, nullptr) << ::dlerror();
    if (handle == nullptr) return -1;
    auto fn = reinterpret_cast<double (*)(double)>(::dlsym(handle, "k"));
    double y = fn ? fn(x) : -1;
    ::dlclose(handle);
    return y;
  }
};

// --- __has_include -----------------------------------------------------------

const char* const kPortHeader =
    "#pragma once\n"
    "#ifdef __has_include\n"
    "#if __has_include(<feature.h>)\n#define HAVE_FEATURE 1\n#else\n#define HAVE_FEATURE "
    "0\n#endif\n"
    "#endif\n";

TEST_P(CcLookups, ProbedHeaderAppearingMisses) {
  write_text(dir + "/inc/port.h", kPortHeader);
  std::filesystem::create_directories(dir + "/inc1");
  write_text(dir + "/k.cpp", "#include <port.h>\nint f() { return HAVE_FEATURE; }\n");
  auto r = request({"-c", "k.cpp", "-Iinc1", "-Iinc", "-o", "k.o"});
  Outcome first = check(r, "k.o");
  ASSERT_EQ(first.plan.kind, PlanKind::kCompiler) << first.plan.reason;
  EXPECT_TRUE(first.stored) << first.why_not;
  EXPECT_TRUE(check(r, "k.o").hit);
  std::string without = read_text(dir + "/k.o");
  write_text(dir + "/inc1/feature.h", "\n");  // the probe's answer flips
  Outcome flipped = check(r, "k.o");
  EXPECT_FALSE(flipped.hit);
  EXPECT_TRUE(flipped.stored) << flipped.why_not;
  EXPECT_NE(read_text(dir + "/k.o"), without);
  EXPECT_TRUE(check(r, "k.o").hit);
  std::filesystem::remove(dir + "/inc1/feature.h");
  EXPECT_TRUE(check(r, "k.o").hit);  // the first entry is valid again
  EXPECT_EQ(store.executions, 2);
}

TEST_P(CcLookups, ProbedHeaderAppearingInAnEarlierDirectoryMisses) {
  // The answer stays "yes", but the header the compile would now see first
  // is a different one: recorded like an include, it is a miss.
  write_text(dir + "/inc/port.h",
             "#if __has_include(<feature.h>)\n#include <feature.h>\n#else\n#define V 0\n#endif\n");
  write_text(dir + "/inc3/feature.h", "#define V 3\n");
  std::filesystem::create_directories(dir + "/inc1");
  write_text(dir + "/k.cpp", "#include \"port.h\"\nint f() { return V; }\n");
  auto r = request({"-c", "k.cpp", "-Iinc1", "-Iinc", "-Iinc3", "-o", "k.o"});
  EXPECT_TRUE(check(r, "k.o").stored);
  EXPECT_TRUE(check(r, "k.o").hit);
  write_text(dir + "/inc1/feature.h", "#define V 1\n");
  EXPECT_FALSE(check(r, "k.o").hit);
  std::string manifest = store.manifests.begin()->second;
  EXPECT_NE(manifest.find("inc1/feature.h"), std::string::npos) << manifest;
}

TEST_P(CcLookups, QuoteProbeLooksInTheIncludersDirectory) {
  write_text(dir + "/inc/port.h",
             "#if __has_include(\"local.h\")\n#define L 1\n#else\n#define L 0\n#endif\n");
  write_text(dir + "/src/k.cpp", "#include <port.h>\nint f() { return L; }\n");
  auto r = request({"-c", "src/k.cpp", "-Iinc", "-o", "k.o"});
  EXPECT_TRUE(check(r, "k.o").stored);
  write_text(dir + "/src/local.h", "\n");  // not the includer's directory: port.h is in inc/
  EXPECT_TRUE(check(r, "k.o").hit);
  write_text(dir + "/inc/local.h", "\n");  // port.h's own directory
  EXPECT_FALSE(check(r, "k.o").hit);
}

TEST_P(CcLookups, HasIncludeNextChains) {
  // inc1/cfg.h -> include_next inc2/cfg.h, whose own probe searches only
  // after inc2. extra.h in inc1 and inc2 is invisible to it.
  write_text(dir + "/inc1/cfg.h",
             "#if __has_include_next(<cfg.h>)\n#include_next <cfg.h>\n#endif\n#define OUTER 10\n");
  write_text(
      dir + "/inc2/cfg.h",
      "#if __has_include_next(<extra.h>)\n#define EXTRA 1\n#else\n#define EXTRA 0\n#endif\n");
  write_text(dir + "/inc2/extra.h", "\n");
  std::filesystem::create_directories(dir + "/inc3");
  write_text(dir + "/k.cpp", "#include <cfg.h>\nint f() { return OUTER + EXTRA; }\n");
  auto r = request({"-c", "k.cpp", "-Iinc1", "-Iinc2", "-Iinc3", "-o", "k.o"});
  Outcome first = check(r, "k.o");
  EXPECT_TRUE(first.stored) << first.why_not;
  EXPECT_TRUE(check(r, "k.o").hit);
  std::string without = read_text(dir + "/k.o");
  write_text(dir + "/inc3/extra.h", "\n");  // inc2's _next probe now says yes
  EXPECT_FALSE(check(r, "k.o").hit);
  EXPECT_NE(read_text(dir + "/k.o"), without);
  EXPECT_TRUE(check(r, "k.o").hit);
}

TEST_P(CcLookups, NonLiteralProbeIsRecorded) {
  write_text(dir + "/inc/port.h",
             "#define FEATURE_HEADER <feature.h>\n"
             "#if __has_include(FEATURE_HEADER)\n#define F 1\n#else\n#define F 0\n#endif\n");
  write_text(dir + "/k.cpp", "#include <port.h>\nint f() { return F; }\n");
  std::filesystem::create_directories(dir + "/inc0");
  auto r = request({"-c", "k.cpp", "-Iinc0", "-Iinc", "-o", "k.o"});
  Outcome o = check(r, "k.o");
  ASSERT_EQ(o.plan.kind, PlanKind::kCompiler) << o.plan.reason;
  EXPECT_TRUE(o.stored) << o.why_not;
  EXPECT_TRUE(check(r, "k.o").hit);
  write_text(dir + "/inc0/feature.h", "\n");  // the macro-named probe now says yes
  EXPECT_FALSE(check(r, "k.o").hit);
  EXPECT_EQ(store.executions, 2);
}

TEST_P(CcLookups, GoogletestTranslationUnitIsStoredAndHits) {
  std::string gtest = "/usr/src/googletest/googletest";
  if (::access((gtest + "/include/gtest/internal/gtest-port.h").c_str(), R_OK) != 0) {
    FAIL() << gtest << " is missing: install Debian's googletest (scripts/setup-deps.sh)";
  }
  write_text(dir + "/t.cpp", "#include <gtest/gtest.h>\nTEST(A, B) { EXPECT_EQ(1, 1); }\n");
  auto r = request({"-c", "t.cpp", "-std=c++17", "-I" + gtest + "/include", "-O0", "-o", "t.o"});
  Outcome first = check(r, "t.o");
  EXPECT_TRUE(first.stored) << first.why_not;
  EXPECT_TRUE(check(r, "t.o").hit);
  std::string manifest = store.manifests.begin()->second;
  EXPECT_NE(manifest.find("/optional\n"), std::string::npos) << "gtest-port.h's <optional> probe";
}

// --- precompiled headers -------------------------------------------------------

// gcc only: Inductor precompiles with gcc, clang PCH builds pass through
// (ClangPchBuildPassesThrough) and clang takes PCHs for -include only.
class GccLookups : public CcLookups {};

TEST_P(GccLookups, GccUsesAPchOnlyForTheFirstInclude) {
  // The rule the PCH candidates rely on, checked against the real compiler:
  // b.h.gch (built from a header with B 7) is taken for a first include only. clang takes PCHs for
  // -include only";
  write_text(dir + "/a.h", "#define A 1\n");
  write_text(dir + "/b.h", "#define B 2\n");
  write_text(dir + "/other.h", "#define B 7\n");
  ASSERT_EQ(run_direct({compiler(), "-fPIC", "-x", "c++-header", "other.h", "-o", "b.h.gch"}, dir,
                       base_env()),
            0);
  write_text(dir + "/first.cpp", "#include \"b.h\"\nextern \"C\" double k(double) { return B; }\n");
  write_text(dir + "/second.cpp",
             "#include \"a.h\"\n#include \"b.h\"\nextern \"C\" double k(double) { return B; }\n");
  for (const char* src : {"first", "second"}) {
    std::string so = std::string(src) + ".so";
    ASSERT_EQ(run_direct({compiler(), "-shared", "-fPIC", std::string(src) + ".cpp", "-o", so}, dir,
                         base_env()),
              0);
  }
  EXPECT_EQ(call_k(dir + "/first.so", 0), 7.0);
  EXPECT_EQ(call_k(dir + "/second.so", 0), 2.0);
}

TEST_P(GccLookups, InductorPchFlowIsCachedAndMissesOnEdits) {
  auto write_tree = [&](const std::string& d, int dep) {
    write_text(d + "/dep.h", "#define DEPV " + std::to_string(dep) + "\n");
    write_text(d + "/prefix.h", "#include \"dep.h\"\ninline double pv() { return DEPV; }\n");
    write_text(d + "/k.cpp", "extern \"C\" double k(double x) { return x + pv(); }\n");
  };
  auto pch = [&](const std::string& d) {
    return request({"-O2", "-fPIC", "-x", "c++-header", "prefix.h", "-o", "prefix.h.gch"}, d);
  };
  auto so = [&](const std::string& d) {
    return request({"-O2", "-shared", "-fPIC", "-include", "prefix.h", "k.cpp", "-o", "k.so"}, d);
  };
  std::string a = dir + "/a";
  write_tree(a, 5);
  Outcome built = execute(planner, store, pch(a));
  ASSERT_EQ(built.plan.kind, PlanKind::kCompiler) << built.plan.reason;
  EXPECT_TRUE(built.stored) << built.why_not;
  Outcome linked = execute(planner, store, so(a));
  EXPECT_TRUE(linked.stored) << linked.why_not;
  EXPECT_EQ(call_k(a + "/k.so", 10), 15.0);
  EXPECT_EQ(store.executions, 2);

  // Unchanged, in a fresh directory: the stored PCH bytes are served, so the
  // consumer's key (which holds the .gch content) is the same: no execution.
  std::string b = dir + "/b";
  write_tree(b, 5);
  EXPECT_TRUE(execute(planner, store, pch(b)).hit);
  EXPECT_EQ(read_text(b + "/prefix.h.gch"), read_text(a + "/prefix.h.gch"));
  EXPECT_TRUE(execute(planner, store, so(b)).hit);
  EXPECT_EQ(store.executions, 2);
  EXPECT_EQ(call_k(b + "/k.so", 10), 15.0);

  // A header the prefix includes changes: both miss, and k(10) follows.
  write_text(b + "/dep.h", "#define DEPV 9\n");
  EXPECT_FALSE(execute(planner, store, pch(b)).hit);
  EXPECT_FALSE(execute(planner, store, so(b)).hit);
  EXPECT_EQ(call_k(b + "/k.so", 10), 19.0);
  // The prefix itself changes: the PCH build misses, and so does the
  // consumer, which agrees with a direct build.
  write_text(b + "/prefix.h", "#include \"dep.h\"\ninline double pv() { return DEPV * 2; }\n");
  EXPECT_FALSE(execute(planner, store, pch(b)).hit);
  Outcome edited = execute(planner, store, so(b));
  EXPECT_FALSE(edited.hit);
  EXPECT_TRUE(edited.stored) << edited.why_not;
  EXPECT_EQ(call_k(b + "/k.so", 10), 28.0);
  std::filesystem::remove(b + "/k.so");
  ASSERT_EQ(run_direct({compiler(), "-O2", "-shared", "-fPIC", "-include", "prefix.h", "k.cpp",
                        "-o", "k.so"},
                       b, base_env()),
            0);
  EXPECT_EQ(call_k(b + "/k.so", 10), 28.0);  // the direct build agrees
  EXPECT_EQ(store.executions, 6);
}

TEST_P(GccLookups, PchBuildIsKeyedByItsHeaderClosure) {
  write_text(dir + "/inc/dep.h", "#define D 1\n");
  write_text(dir + "/p.hpp", "#include <dep.h>\n");
  auto r = request({"p.hpp", "-Iinc", "-o", "p.hpp.gch"});  // a header named by its extension
  Outcome first = execute(planner, store, r);
  ASSERT_EQ(first.plan.kind, PlanKind::kCompiler) << first.plan.reason;
  EXPECT_TRUE(first.stored) << first.why_not;
  EXPECT_TRUE(execute(planner, store, r).hit);
  write_text(dir + "/inc/dep.h", "#define D 2\n");
  EXPECT_FALSE(execute(planner, store, r).hit);
  Outcome c =
      execute(planner, store, request({"-c", "-x", "c++-header", "p.hpp", "-Iinc", "-o", "c.gch"}));
  EXPECT_EQ(c.plan.kind, PlanKind::kCompiler) << c.plan.reason;
  EXPECT_TRUE(path_exists(dir + "/c.gch"));
  EXPECT_EQ(
      execute(planner, store, request({"-S", "-x", "c++-header", "p.hpp", "-o", "p.s"})).plan.kind,
      PlanKind::kPassthrough);
}

TEST_P(CcLookups, ClangPchBuildPassesThrough) {
  write_text(dir + "/prefix.h", "inline double pv() { return 5; }\n");
  Outcome o =
      execute(planner, store, request({"-x", "c++-header", "prefix.h", "-o", "prefix.h.pch"}));
  if (gcc()) {
    EXPECT_EQ(o.plan.kind, PlanKind::kCompiler) << o.plan.reason;
    return;
  }
  EXPECT_EQ(o.plan.kind, PlanKind::kPassthrough);
  EXPECT_EQ(o.plan.reason_code, kReasonPchUnsupported) << o.plan.reason;
}

TEST_P(CcLookups, PchAppearingBesideAForcedIncludeMisses) {
  // gcc takes prefix.h.gch, clang prefix.h.pch (or .gch) for -include.
  write_text(dir + "/prefix.h", "inline double pv() { return 5; }\n");
  write_text(dir + "/other.h", "inline double pv() { return 8; }\n");
  write_text(dir + "/k.cpp", "extern \"C\" double k(double x) { return x + pv(); }\n");
  auto r = request({"-O2", "-shared", "-fPIC", "-include", "prefix.h", "k.cpp", "-o", "k.so"});
  EXPECT_TRUE(check(r, "k.so", "ref.so").stored);
  EXPECT_TRUE(check(r, "k.so", "ref.so").hit);
  // gcc takes any valid PCH (here one built from other.h); clang checks that
  // it was built from this very prefix.h, so its result stays 15.
  std::string pch = gcc() ? "prefix.h.gch" : "prefix.h.pch";
  std::string from = gcc() ? "other.h" : "prefix.h";
  ASSERT_EQ(run_direct({compiler(), "-O2", "-fPIC", "-x", "c++-header", from, "-o", pch}, dir,
                       base_env()),
            0);
  Outcome o = check(r, "k.so", "ref.so");
  EXPECT_FALSE(o.hit);
  EXPECT_TRUE(o.stored) << o.why_not;
  EXPECT_EQ(call_k(dir + "/k.so", 10), gcc() ? 18.0 : 15.0);
  EXPECT_TRUE(check(r, "k.so", "ref.so").hit);
}

TEST_P(GccLookups, GchAppearingBesideTheFirstIncludeMisses) {
  write_text(dir + "/inc/big.h", "#define V 2\n");
  write_text(dir + "/other.h", "#define V 7\n");
  write_text(dir + "/k.cpp",
             "#include <big.h>\nextern \"C\" double k(double x) { return x + V; }\n");
  std::filesystem::create_directories(dir + "/inc0");
  auto r = request({"-shared", "-fPIC", "-Iinc0", "-Iinc", "k.cpp", "-o", "k.so"});
  EXPECT_TRUE(check(r, "k.so", "ref.so").stored);
  EXPECT_TRUE(check(r, "k.so", "ref.so").hit);
  ASSERT_EQ(run_direct({compiler(), "-fPIC", "-x", "c++-header", "other.h", "-o", "inc/big.h.gch"},
                       dir, base_env()),
            0);
  EXPECT_FALSE(check(r, "k.so", "ref.so").hit);
  EXPECT_EQ(call_k(dir + "/k.so", 10), 17.0);
  EXPECT_TRUE(check(r, "k.so", "ref.so").hit);
  // A .gch in an earlier directory is taken although big.h is not there.
  write_text(dir + "/other.h", "#define V 4\n");
  ASSERT_EQ(run_direct({compiler(), "-fPIC", "-x", "c++-header", "other.h", "-o", "inc0/big.h.gch"},
                       dir, base_env()),
            0);
  EXPECT_FALSE(check(r, "k.so", "ref.so").hit);
  EXPECT_EQ(call_k(dir + "/k.so", 10), 14.0);
}

TEST_P(GccLookups, MacroFirstIncludeTakingAPchIsRecorded) {
  // `#include HDR` taking big.h.gch: the .d names neither big.h nor the PCH,
  // the record has the PCH's content.
  write_text(dir + "/big.h", "#define V 2\n");
  write_text(dir + "/other.h", "#define V 7\n");
  write_text(
      dir + "/k.cpp",
      "#define HDR \"big.h\"\n#include HDR\nextern \"C\" double k(double x) { return x + V; }\n");
  ASSERT_EQ(run_direct({compiler(), "-fPIC", "-x", "c++-header", "other.h", "-o", "big.h.gch"}, dir,
                       base_env()),
            0);
  auto r = request({"-shared", "-fPIC", "k.cpp", "-o", "k.so"});
  Outcome o = check(r, "k.so", "ref.so");
  EXPECT_EQ(call_k(dir + "/k.so", 10), 17.0);
  EXPECT_TRUE(o.stored) << o.why_not;
  EXPECT_TRUE(check(r, "k.so", "ref.so").hit);
  write_text(dir + "/other.h", "#define V 4\n");  // the PCH is rebuilt from other text
  ASSERT_EQ(run_direct({compiler(), "-fPIC", "-x", "c++-header", "other.h", "-o", "big.h.gch"}, dir,
                       base_env()),
            0);
  EXPECT_FALSE(check(r, "k.so", "ref.so").hit);
  EXPECT_EQ(call_k(dir + "/k.so", 10), 14.0);
  std::filesystem::remove(dir + "/big.h.gch");
  EXPECT_FALSE(check(r, "k.so", "ref.so").hit);
  EXPECT_EQ(call_k(dir + "/k.so", 10), 12.0);
}

TEST_P(GccLookups, GchDirectoryIsRecordedFileByFile) {
  write_text(dir + "/prefix.h", "inline double pv() { return 5; }\n");
  write_text(dir + "/other.h", "inline double pv() { return 8; }\n");
  write_text(dir + "/k.cpp", "extern \"C\" double k(double x) { return x + pv(); }\n");
  std::filesystem::create_directories(dir + "/prefix.h.gch");
  ASSERT_EQ(run_direct({compiler(), "-O2", "-fPIC", "-x", "c++-header", "other.h", "-o",
                        "prefix.h.gch/O2"},
                       dir, base_env()),
            0);
  auto r = request({"-O2", "-shared", "-fPIC", "-include", "prefix.h", "k.cpp", "-o", "k.so"});
  Outcome first = check(r, "k.so", "ref.so");
  EXPECT_TRUE(first.stored) << first.why_not;
  EXPECT_EQ(call_k(dir + "/k.so", 10), 18.0);
  EXPECT_TRUE(check(r, "k.so", "ref.so").hit);
  std::filesystem::rename(dir + "/prefix.h.gch/O2", dir + "/prefix.h.gch/renamed");
  EXPECT_FALSE(check(r, "k.so", "ref.so").hit);  // the directory's names changed
  std::filesystem::remove(dir + "/prefix.h.gch/renamed");
  EXPECT_FALSE(check(r, "k.so", "ref.so").hit);
  EXPECT_EQ(call_k(dir + "/k.so", 10), 15.0);
}

INSTANTIATE_TEST_SUITE_P(Gcc, GccLookups, ::testing::Values("g++"),
                         [](const auto&) { return std::string("gcc"); });
INSTANTIATE_TEST_SUITE_P(Compilers, CcLookups, ::testing::Values("g++", "clang++"),
                         [](const auto& info) {
                           return info.param == "g++" ? std::string("gcc") : std::string("clang");
                         });

}  // namespace
}  // namespace ccpool::compiler::testing
