// Generic declared jobs, ptxas, manifests and key sensitivity.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "compiler/manifest.h"
#include "compiler/planner.h"
#include "compiler/subprocess.h"
#include "tests/compiler/executor.h"
#include "tests/support/scratch.h"

namespace ccpool::compiler::testing {
namespace {

std::string make_script(const std::string& path, const std::string& body) {
  write_text(path, "#!/bin/sh\n" + body);
  ::chmod(path.c_str(), 0755);
  return path;
}

Request generic_request(const std::string& dir, const std::string& tool) {
  Request r;
  r.program = tool;
  r.argv = {tool, "in.txt", "out.txt"};
  r.cwd = dir;
  r.env = base_env();
  r.declared_inputs = {"in.txt"};
  r.declared_outputs = {"out.txt"};
  return r;
}

TEST(Generic, DeclaredJobIsCachedAndKeyedOnInputs) {
  std::string dir = ::ccpool::testing::scratch_dir();
  std::string tool = make_script(dir + "/upper", "tr a-z A-Z < \"$1\" > \"$2\"\n");
  write_text(dir + "/in.txt", "hello\n");
  Planner planner;
  MemoryStore store;
  Request r = generic_request(dir, tool);
  Outcome first = execute(planner, store, r);
  EXPECT_EQ(first.plan.kind, PlanKind::kGeneric);
  EXPECT_TRUE(first.stored) << first.why_not;
  EXPECT_FALSE(first.plan.uses_work_dir);
  ASSERT_EQ(first.plan.outputs.size(), 1u);
  EXPECT_EQ(first.plan.outputs[0].run_path, dir + "/out.txt");
  std::filesystem::remove(dir + "/out.txt");
  EXPECT_TRUE(execute(planner, store, r).hit);
  EXPECT_EQ(read_text(dir + "/out.txt"), "HELLO\n");
  write_text(dir + "/in.txt", "bye\n");
  EXPECT_FALSE(execute(planner, store, r).hit);
  EXPECT_EQ(read_text(dir + "/out.txt"), "BYE\n");
  EXPECT_EQ(store.executions, 2);
}

TEST(Generic, KeyIngredientsFlipTheKey) {
  std::string dir = ::ccpool::testing::scratch_dir();
  std::string tool = make_script(dir + "/t", "cp \"$1\" \"$2\"\n");
  write_text(dir + "/in.txt", "x");
  Planner planner;
  Request base = generic_request(dir, tool);
  Digest k0 = planner.plan(base, dir + "/w")->flight_key;
  EXPECT_EQ(planner.plan(base, dir + "/w2")->flight_key, k0);
  Request argv = base;
  argv.argv.push_back("-v");
  Request env = base;
  env.env.push_back("TZ=UTC");
  Request unrelated_env = base;
  unrelated_env.env.push_back("RANDOM_NOISE=1");
  Request extra = base;
  extra.env.push_back("MY_KNOB=1");
  extra.env.push_back("CCPOOL_KEY_ENV=MY_KNOB");
  Request cwd = base;
  cwd.cwd = dir + "/.";
  EXPECT_NE(planner.plan(argv, dir + "/w")->flight_key, k0);
  EXPECT_NE(planner.plan(env, dir + "/w")->flight_key, k0);
  EXPECT_EQ(planner.plan(unrelated_env, dir + "/w")->flight_key, k0);
  EXPECT_NE(planner.plan(extra, dir + "/w")->flight_key, k0);
  EXPECT_NE(planner.plan(cwd, dir + "/w")->flight_key, k0);
  make_script(tool, "cp \"$1\" \"$2\"  # changed\n");
  EXPECT_NE(planner.plan(base, dir + "/w")->flight_key, k0);
}

TEST(Generic, MissingInputOrNoOutputsPassThrough) {
  std::string dir = ::ccpool::testing::scratch_dir();
  std::string tool = make_script(dir + "/t", "true\n");
  Planner planner;
  Request r = generic_request(dir, tool);
  auto missing = planner.plan(r, dir + "/w");
  EXPECT_EQ(missing->kind, PlanKind::kPassthrough);
  EXPECT_NE(missing->reason.find("in.txt"), std::string::npos);
  r.declared_inputs.clear();
  r.declared_outputs.clear();
  EXPECT_EQ(planner.plan(r, dir + "/w")->kind, PlanKind::kPassthrough);
}

TEST(Generic, InputChangedAfterPlanIsNotStored) {
  std::string dir = ::ccpool::testing::scratch_dir();
  std::string tool = make_script(dir + "/t", "cp \"$1\" \"$2\"\n");
  write_text(dir + "/in.txt", "one");
  Planner planner;
  MemoryStore store;
  Outcome o = execute(planner, store, generic_request(dir, tool),
                      [&] { write_text(dir + "/in.txt", "two"); });
  EXPECT_FALSE(o.stored);
  EXPECT_EQ(store.results.size(), 0u);
}

TEST(Generic, ShimIsStrippedFromTheEnvironment) {
  auto env =
      environment_without_shim({"A=1", "LD_PRELOAD=/x/libccpool-shim.so:/y/libother.so", "B=2"});
  EXPECT_EQ(env, (std::vector<std::string>{"A=1", "LD_PRELOAD=/y/libother.so", "B=2"}));
  EXPECT_EQ(environment_without_shim({"LD_PRELOAD=/lib/libccpool-shim.so"}),
            std::vector<std::string>{});
}

TEST(Ptxas, StandInScriptIsKeyedOnIdentityArgsAndInput) {
  std::string dir = ::ccpool::testing::scratch_dir();
  std::filesystem::create_directories(dir + "/bin");
  std::string tool = make_script(
      dir + "/bin/ptxas",
      "out=''; in=''; while [ $# -gt 0 ]; do case \"$1\" in -o) out=$2; shift;;"
      " -*) ;; *) in=$1;; esac; shift; done; { echo cubin; cat \"$in\"; } > \"$out\"\n");
  write_text(dir + "/k.ptx", ".version 8.0\n");
  Planner planner;
  MemoryStore store;
  Request r;
  r.program = tool;
  r.argv = {"ptxas", "-arch=sm_80", "-O3", "k.ptx", "-o", "k.cubin"};
  r.cwd = dir;
  r.env = base_env();
  Outcome first = execute(planner, store, r);
  EXPECT_EQ(first.plan.kind, PlanKind::kCompiler) << first.plan.reason;
  EXPECT_TRUE(first.stored) << first.why_not;
  EXPECT_TRUE(execute(planner, store, r).hit);
  EXPECT_EQ(read_text(dir + "/k.cubin"), "cubin\n.version 8.0\n");
  Request other_arch = r;
  other_arch.argv[1] = "-arch=sm_90";
  EXPECT_NE(planner.plan(other_arch, dir + "/w")->flight_key, first.plan.flight_key);
  write_text(dir + "/k.ptx", ".version 8.1\n");
  EXPECT_FALSE(execute(planner, store, r).hit);
  EXPECT_EQ(read_text(dir + "/k.cubin"), "cubin\n.version 8.1\n");
  make_script(tool, "exit 1\n");
  EXPECT_NE(planner.plan(r, dir + "/w")->flight_key, first.plan.flight_key);
  Request two_inputs = r;
  two_inputs.argv.push_back("b.ptx");
  EXPECT_EQ(planner.plan(two_inputs, dir + "/w")->kind, PlanKind::kPassthrough);
}

TEST(Manifest, RoundTripsAndRejectsGarbage) {
  Manifest m;
  ManifestEntry e;
  e.result_key = hash_bytes("r");
  e.date_bucket = 42;
  e.files = {{"a b\n.h", hash_bytes("a")}, {"/usr/include/x.h", hash_bytes("x")}};
  e.negatives = {"inc1/h.h"};
  m.entries = {e, e};
  std::string text = serialize_manifest(m);
  auto back = parse_manifest(text);
  ASSERT_TRUE(back);
  ASSERT_EQ(back->entries.size(), 2u);
  EXPECT_EQ(back->entries[1].files, e.files);
  EXPECT_EQ(back->entries[0].negatives, e.negatives);
  EXPECT_EQ(back->entries[0].date_bucket, 42);
  EXPECT_FALSE(parse_manifest(text.substr(0, text.size() - 3)));
  EXPECT_FALSE(parse_manifest("ccpool-manifest v4\n"));
}

TEST(CcKeys, OutputPathLeavesTheKeyOnlyWhenHarmless) {
  std::string dir = ::ccpool::testing::scratch_dir();
  write_text(dir + "/k.cpp", "int f() { return 1; }\n");
  Planner planner;
  auto key = [&](std::vector<std::string> args) {
    Request r;
    r.program = "/usr/bin/g++";
    r.argv = {"g++"};
    r.argv.insert(r.argv.end(), args.begin(), args.end());
    r.cwd = dir;
    r.env = base_env();
    auto p = planner.plan(r, dir + "/w");
    EXPECT_EQ(p->kind, PlanKind::kCompiler) << p->reason;
    return p->flight_key;
  };
  EXPECT_EQ(key({"-c", "k.cpp", "-o", "a.o"}), key({"-c", "k.cpp", "-o", "b.o"}));
  EXPECT_EQ(key({"k.cpp", "-shared", "-fPIC", "-o", "a.so"}),
            key({"k.cpp", "-shared", "-fPIC", "-o", "b.so"}));
  EXPECT_NE(key({"-c", "k.cpp", "-gsplit-dwarf", "-o", "a.o"}),
            key({"-c", "k.cpp", "-gsplit-dwarf", "-o", "b.o"}));
  EXPECT_NE(key({"-c", "k.cpp", "--coverage", "-o", "a.o"}),
            key({"-c", "k.cpp", "--coverage", "-o", "b.o"}));
  EXPECT_NE(key({"-c", "k.cpp", "-MD", "-o", "a.o"}), key({"-c", "k.cpp", "-MD", "-o", "b.o"}));
  EXPECT_EQ(key({"-c", "k.cpp", "-MD", "-MT", "t", "-MF", "x.d", "-o", "a.o"}),
            key({"-c", "k.cpp", "-MD", "-MT", "t", "-MF", "y.d", "-o", "b.o"}));
  EXPECT_NE(key({"-c", "k.cpp", "-O2"}), key({"-c", "k.cpp", "-O3"}));
  EXPECT_NE(key({"-c", "k.cpp", "-DA"}), key({"-c", "k.cpp", "-DB"}));
  EXPECT_NE(key({"-c", "k.cpp"}), key({"-S", "k.cpp"}));
}

}  // namespace
}  // namespace ccpool::compiler::testing
