// The ptxas model (compiler/ptxas_model.cpp): keyed by content, not by the
// temp paths Triton gives it; options outside the verified table pass
// through; output naming an unkeyed path is never replayed. The last tests
// run the toolkit's real ptxas (exit 125 without it) and show, byte for byte,
// that the paths cannot reach the cubin for the options Triton passes.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "compiler/planner.h"
#include "tests/compiler/executor.h"
#include "tests/support/scratch.h"

namespace ccpool::compiler::testing {
namespace {

constexpr const char* kCudaPtxas = "/usr/local/cuda/bin/ptxas";

// A PTX kernel as Triton writes it (.file/.loc line info, one entry).
constexpr const char* kPtx = R"(.version 8.7
.target sm_90a
.address_size 64
	.file	1 "/home/user/model.py"

.visible .entry scale(
	.param .u64 scale_param_0,
	.param .u32 scale_param_1
)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<4>;
	.reg .f32 	%f<3>;
	.reg .b64 	%rd<5>;
	.loc	1 10 0
	ld.param.u64 	%rd1, [scale_param_0];
	ld.param.u32 	%r2, [scale_param_1];
	mov.u32 	%r1, %tid.x;
	setp.ge.s32 	%p1, %r1, %r2;
	.loc	1 12 0
	@%p1 bra 	$L__BB0_2;
	cvta.to.global.u64 	%rd2, %rd1;
	mul.wide.s32 	%rd3, %r1, 4;
	add.s64 	%rd4, %rd2, %rd3;
	ld.global.f32 	%f1, [%rd4];
	mul.f32 	%f2, %f1, 0f40400000;
	st.global.f32 	[%rd4], %f2;
$L__BB0_2:
	ret;
}
)";

std::string make_script(const std::string& path, const std::string& body) {
  write_text(path, "#!/bin/sh\n" + body);
  ::chmod(path.c_str(), 0755);
  return path;
}

// A stand-in ptxas: writes "cubin" + the input's content to -o, and names
// the input on stderr when WARN_NAMES_INPUT is set.
std::string stand_in(const std::string& dir) {
  std::filesystem::create_directories(dir + "/bin");
  return make_script(dir + "/bin/ptxas",
                     "out=''; in=''; while [ $# -gt 0 ]; do case \"$1\" in -o) out=$2; shift;;"
                     " --gpu-name|-arch|--opt-level) shift;; -*) ;; *) in=$1;; esac; shift; done\n"
                     "{ echo cubin; cat \"$in\"; } > \"$out\"\n"
                     "echo 'ptxas info    : Used 4 registers' >&2\n"
                     "[ -n \"$WARN_NAMES_INPUT\" ] && echo \"ptxas $in, line 1; warning : x\" >&2\n"
                     "exit 0\n");
}

Request ptxas_request(const std::string& tool, const std::string& cwd,
                      std::vector<std::string> args) {
  Request r;
  r.program = tool;
  r.argv = {tool};
  r.argv.insert(r.argv.end(), args.begin(), args.end());
  r.cwd = cwd;
  r.env = base_env();
  return r;
}

std::vector<std::string> triton_line(const std::string& ptx) {
  return {"-lineinfo", "-v", "--regAllocOptLevel=2", "--gpu-name=sm_90a", ptx, "-o", ptx + ".o"};
}

TEST(PtxasModel, TempNamesDoNotReachTheKey) {
  std::string dir = ::ccpool::testing::scratch_dir();
  std::string tool = stand_in(dir);
  std::filesystem::create_directories(dir + "/other");
  write_text(dir + "/tmpaaaa.ptx", kPtx);
  write_text(dir + "/other/tmpzzzzzzzz.ptx", kPtx);
  Planner planner;
  MemoryStore store;
  Outcome first =
      execute(planner, store, ptxas_request(tool, dir, triton_line(dir + "/tmpaaaa.ptx")));
  ASSERT_EQ(first.plan.kind, PlanKind::kCompiler) << first.plan.reason;
  EXPECT_TRUE(first.stored) << first.why_not;
  Request second = ptxas_request(tool, dir + "/other", triton_line(dir + "/other/tmpzzzzzzzz.ptx"));
  Outcome hit = execute(planner, store, second);
  EXPECT_TRUE(hit.hit);
  EXPECT_EQ(hit.plan.flight_key, first.plan.flight_key);
  EXPECT_EQ(read_text(dir + "/other/tmpzzzzzzzz.ptx.o"), std::string("cubin\n") + kPtx);
  EXPECT_EQ(hit.stderr_text, first.stderr_text);
  // Relative spellings from another cwd share the key too.
  Request relative = ptxas_request(tool, dir + "/other", triton_line("tmpzzzzzzzz.ptx"));
  EXPECT_EQ(planner.plan(relative, dir + "/w")->flight_key, first.plan.flight_key);
  EXPECT_EQ(store.executions, 1);
}

TEST(PtxasModel, ContentOptionsToolAndEnvironmentAreKeyed) {
  std::string dir = ::ccpool::testing::scratch_dir();
  std::string tool = stand_in(dir);
  write_text(dir + "/k.ptx", kPtx);
  Planner planner;
  auto key = [&](std::vector<std::string> args, std::vector<std::string> env = {}) {
    Request r = ptxas_request(tool, dir, std::move(args));
    r.env.insert(r.env.end(), env.begin(), env.end());
    Result<Plan> p = planner.plan(r, dir + "/w");
    EXPECT_EQ(p->kind, PlanKind::kCompiler) << p->reason;
    return p->flight_key;
  };
  Digest base = key(triton_line("k.ptx"));
  EXPECT_NE(key({"-lineinfo", "-v", "--regAllocOptLevel=2", "--gpu-name=sm_80", "k.ptx", "-o",
                 "k.ptx.o"}),
            base);
  EXPECT_NE(key({"-lineinfo", "-v", "--fmad=false", "--regAllocOptLevel=2", "--gpu-name=sm_90a",
                 "k.ptx", "-o", "k.ptx.o"}),
            base);
  EXPECT_NE(key({"-v", "--regAllocOptLevel=2", "--gpu-name=sm_90a", "k.ptx", "-o", "k.ptx.o"}),
            base);
  EXPECT_NE(key({"-v", "--opt-level", "0", "--gpu-name=sm_90a", "k.ptx", "-o", "k.ptx.o"}),
            key({"-v", "--opt-level", "3", "--gpu-name=sm_90a", "k.ptx", "-o", "k.ptx.o"}));
  EXPECT_NE(key({"-O0", "--gpu-name=sm_90a", "k.ptx", "-o", "k.o"}),
            key({"-O3", "--gpu-name=sm_90a", "k.ptx", "-o", "k.o"}));
  EXPECT_NE(key(triton_line("k.ptx"), {"LANG=C"}), base);
  EXPECT_EQ(key(triton_line("k.ptx"), {"RANK=3"}), base);
  write_text(dir + "/k.ptx", std::string(kPtx) + "\n");
  EXPECT_NE(key(triton_line("k.ptx")), base);
  make_script(tool, "exit 0\n");
  EXPECT_NE(key(triton_line("k.ptx")), base);
}

TEST(PtxasModel, OnlyVerifiedSpellingsAreCached) {
  std::string dir = ::ccpool::testing::scratch_dir();
  std::string tool = stand_in(dir);
  write_text(dir + "/k.ptx", kPtx);
  write_text(dir + "/2", kPtx);
  Planner planner;
  auto kind = [&](std::vector<std::string> args) {
    return planner.plan(ptxas_request(tool, dir, std::move(args)), dir + "/w")->kind;
  };
  const std::vector<std::vector<std::string>> cached = {
      {"-lineinfo", "-v", "--gpu-name=sm_90a", "k.ptx", "-o", "k.o"},
      {"-lineinfo", "-suppress-debug-info", "-v", "--gpu-name=sm_90a", "k.ptx", "-o", "k.o"},
      {"-v", "--opt-level", "0", "--regAllocOptLevel=2", "-arch", "sm_90a", "k.ptx", "-o", "k.o"},
      {"-v", "--fmad=false", "-maxrregcount", "32", "-O3", "--gpu-name", "sm_90a", "k.ptx",
       "--output-file=k.o"},
      {"-v", "-O=2", "-warn-spills", "-Werror", "--gpu-name=sm_90a", "-o", "k.o", "k.ptx"},
      {"-arch=sm_75", "-m64", "k.ptx", "-o", "k.cubin"},  // as nvcc runs it
  };
  for (const auto& args : cached)
    EXPECT_EQ(kind(args), PlanKind::kCompiler) << args[1] << " " << args[2];
  const std::vector<std::vector<std::string>> passed = {
      // ptxas reads "-O 2" as -O plus a second input named 2.
      {"-v", "-O", "2", "--gpu-name=sm_90a", "k.ptx", "-o", "k.o"},
      {"-g", "-v", "--gpu-name=sm_90a", "k.ptx", "-o", "k.o"},  // path reaches the cubin
      {"--device-debug", "--gpu-name=sm_90a", "k.ptx", "-o", "k.o"},
      {"--options-file", "opts", "--gpu-name=sm_90a", "k.ptx", "-o", "k.o"},  // reads a file
      {"--frobnicate", "--gpu-name=sm_90a", "k.ptx", "-o", "k.o"},            // unknown
      {"-lineinfo=1", "--gpu-name=sm_90a", "k.ptx", "-o", "k.o"},             // a flag with a value
      {"--gpu-name=sm_90a", "k.ptx", "2", "-o", "k.o"},                       // two inputs
      {"--gpu-name=sm_90a", "k.ptx"},                                         // no -o
      {"--gpu-name=sm_90a", "k.ptx", "-o", "-"},
      {"--gpu-name=sm_90a", "k.ptx", "-o", "k.ptx"},
      {"--gpu-name=sm_90a", "k.ptx", "-o", "a.o", "-o", "b.o"},
      {"--version"},
      {"--gpu-name"},
  };
  for (const auto& args : passed)
    EXPECT_EQ(kind(args), PlanKind::kPassthrough) << args[0] << " " << args[1];
}

TEST(PtxasModel, OutputNamingTheTempPathIsNotStored) {
  std::string dir = ::ccpool::testing::scratch_dir();
  std::string tool = stand_in(dir);
  write_text(dir + "/tmpaaaa.ptx", kPtx);
  write_text(dir + "/tmpbbbb.ptx", kPtx);
  Planner planner;
  MemoryStore store;
  Request a = ptxas_request(tool, dir, triton_line(dir + "/tmpaaaa.ptx"));
  a.env.push_back("WARN_NAMES_INPUT=1");
  Outcome first = execute(planner, store, a);
  EXPECT_NE(first.stderr_text.find(dir + "/tmpaaaa.ptx, line 1"), std::string::npos);
  EXPECT_FALSE(first.stored);
  EXPECT_NE(first.why_not.find("tmpaaaa.ptx"), std::string::npos) << first.why_not;
  Request b = ptxas_request(tool, dir, triton_line(dir + "/tmpbbbb.ptx"));
  b.env.push_back("WARN_NAMES_INPUT=1");
  Outcome second = execute(planner, store, b);
  EXPECT_FALSE(second.hit);
  EXPECT_NE(second.stderr_text.find(dir + "/tmpbbbb.ptx, line 1"), std::string::npos);
  EXPECT_EQ(planner.replay_blocker(first.plan, "", "ptxas info    : Used 4 registers\n"), "");
}

// --- the real ptxas -----------------------------------------------------------------
void need_cuda_ptxas() {
  if (::access(kCudaPtxas, X_OK) != 0) {
    std::fprintf(stderr, "SKIP: %s is not installed (the CUDA toolkit)\n", kCudaPtxas);
    std::_Exit(125);
  }
}

// Compiles kPtx with `options` under two temp names in different dirs;
// returns whether the two cubins are byte-identical.
bool same_cubin_under_two_names(const std::string& dir, const std::vector<std::string>& options) {
  std::string a = dir + "/a/tmpq1w2e3r4.ptx";
  std::string b = dir + "/deeper/dir/tmpzx.ptx";
  std::filesystem::create_directories(dir + "/a");
  std::filesystem::create_directories(dir + "/deeper/dir");
  write_text(a, kPtx);
  write_text(b, kPtx);
  for (const std::string& in : {a, b}) {
    std::vector<std::string> argv = {kCudaPtxas};
    argv.insert(argv.end(), options.begin(), options.end());
    argv.insert(argv.end(), {"--gpu-name=sm_90a", in, "-o", in + ".o"});
    std::string err;
    EXPECT_EQ(run_direct(argv, dir, base_env(), &err), 0) << err;
  }
  return read_text(a + ".o") == read_text(b + ".o");
}

TEST(PtxasReal, PathsCannotReachTheCubinForTritonsOptions) {
  need_cuda_ptxas();
  std::string dir = ::ccpool::testing::scratch_dir();
  const std::vector<std::vector<std::string>> triton_options = {
      {"-lineinfo", "-v"},
      {"-lineinfo", "-v", "--regAllocOptLevel=2"},
      {"-lineinfo", "-suppress-debug-info", "-v"},
      {"-lineinfo", "--fmad=false", "-v"},
      {"-lineinfo", "-v", "--opt-level", "0"},
      {"-lineinfo", "-v", "-maxrregcount=32", "-O3", "-warn-spills"},  // PTXAS_OPTIONS-style extras
  };
  for (const auto& options : triton_options) {
    EXPECT_TRUE(same_cubin_under_two_names(dir, options)) << options.back();
  }
  // The one that does: ptxas 13 writes the input path into -g's debug info.
  EXPECT_FALSE(same_cubin_under_two_names(dir, {"-g"}));
}

TEST(PtxasReal, SecondTempNameHitsByteIdentical) {
  need_cuda_ptxas();
  std::string dir = ::ccpool::testing::scratch_dir();
  write_text(dir + "/tmp1.ptx", kPtx);
  write_text(dir + "/tmp2.ptx", kPtx);
  write_text(dir + "/ref.ptx", kPtx);
  std::string err;
  std::vector<std::string> direct = {kCudaPtxas};
  for (const std::string& a : triton_line(dir + "/ref.ptx")) direct.push_back(a);
  ASSERT_EQ(run_direct(direct, dir, base_env(), &err), 0) << err;
  Planner planner;
  MemoryStore store;
  Outcome first =
      execute(planner, store, ptxas_request(kCudaPtxas, dir, triton_line(dir + "/tmp1.ptx")));
  EXPECT_TRUE(first.stored) << first.why_not;
  Outcome second =
      execute(planner, store, ptxas_request(kCudaPtxas, dir, triton_line(dir + "/tmp2.ptx")));
  EXPECT_TRUE(second.hit);
  EXPECT_EQ(second.stderr_text, first.stderr_text);
  EXPECT_NE(first.stderr_text.find("ptxas info"), std::string::npos);
  EXPECT_EQ(read_text(dir + "/tmp2.ptx.o"), read_text(dir + "/ref.ptx.o"));
  EXPECT_EQ(read_text(dir + "/tmp1.ptx.o"), read_text(dir + "/ref.ptx.o"));
  EXPECT_EQ(store.executions, 1);
}

}  // namespace
}  // namespace ccpool::compiler::testing
