// nvcc -c of one .cu source as one cached job, keyed on the record like a
// C/C++ compile (cc_manifest.cpp's lookup and finish; docs/cache-keys.md,
// "nvcc").
//
// nvcc's inner steps (gcc -E, cudafe++, cicc, ptxas, fatbinary, the host
// compile) are dynamically linked programs: the whole command runs with
// libccpool-trace.so preloaded, and the record names every program run and
// library loaded (by content), nvcc.profile, libdevice, every header found
// and every path probed (absent), every variable read. The flight key is
// nvcc's identity, the program and argv, the cwd (cudafe++ and cicc get the
// source's absolute path), the environment allowlist and the source; the
// result key is H(flight key, the record's manifest entry). A hit runs
// nothing. What the record needs to know of nvcc (observed.h,
// ObservedRun::nvcc): the listing of its temp dir at exit (its cleanup),
// the clock its front ends read at startup, and refusing what asks the GPU.
#include <algorithm>

#include "base/process_facts.h"
#include "compiler/key_hash.h"
#include "compiler/nvcc_args.h"
#include "compiler/path_names.h"
#include "compiler/plan_helpers.h"
#include "compiler/planner_impl.h"
#include "compiler/reason_code.h"

namespace ccpool::compiler {
namespace {

// Environment nvcc or its host compiler read (besides the C/C++ list). The
// record checks every variable the run read; these are keyed up front too,
// as before.
const std::vector<std::string> kNvccEnv = {"CPATH",
                                           "C_INCLUDE_PATH",
                                           "CPLUS_INCLUDE_PATH",
                                           "LIBRARY_PATH",
                                           "COMPILER_PATH",
                                           "GCC_EXEC_PREFIX",
                                           "GCC_COMPARE_DEBUG",
                                           "SOURCE_DATE_EPOCH",
                                           "LANG",
                                           "LANGUAGE",
                                           "LC_ALL",
                                           "LC_CTYPE",
                                           "LC_MESSAGES",
                                           "TZ",
                                           "COLUMNS",
                                           "GCC_COLORS",
                                           "GCC_URLS",
                                           "TERM_URLS",
                                           "PATH",
                                           "LD_LIBRARY_PATH",
                                           "TMPDIR",
                                           "NVCC_CCBIN",
                                           "NVCC_PREPEND_FLAGS",
                                           "NVCC_APPEND_FLAGS"};

}  // namespace

Result<Plan> Planner::Impl::plan_nvcc(const Request& request, const ToolIdentity& tool,
                                      const std::string& work_dir) {
  NvccArgs args = parse_nvcc_args(request.argv);
  if (!args.refused.empty()) return passthrough_plan(request, args.refused_code, args.refused);
  for (const char* name : {"NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS"}) {
    std::optional<std::string> v = env_value(request.env, name);
    if (v && !v->empty()) {
      return passthrough_plan(request, reason_code("nvcc_env", name),
                              std::string(name) + " adds unchecked options");
    }
  }
  for (const char* name : {"DEPENDENCIES_OUTPUT", "SUNPRO_DEPENDENCIES"}) {
    if (env_value(request.env, name))
      return passthrough_plan(request, "depfile_env", std::string(name) + " with nvcc");
  }
  if (trace_library.empty()) {
    return passthrough_plan(
        request, "trace_unavailable",
        "libccpool-trace.so not found (set CCPOOL_TRACE_LIBRARY or install it beside ccpool)");
  }
  std::string source_abs = absolute_path(args.source, request.cwd);
  Result<HashedFile> source = hasher.hash(source_abs);
  if (!source)
    return passthrough_plan(request, "source_unreadable", "source: " + source.error().message);

  Hasher h;
  h.add_field("ccpool-nvcc-v2");
  hash_digest(h, tool.key);
  h.add_field(request.program);
  h.add_u64(request.argv.size());
  for (const std::string& a : request.argv) h.add_field(a);
  h.add_field(request.cwd);
  hash_env(h, request.env, kNvccEnv);
  hash_digest(h, source->content);

  auto detail = std::make_shared<PlanDetail>();
  detail->tools.emplace_back(tool.real_path, tool.stat);
  detail->inputs.push_back({source_abs, source->content});
  CcDetail cc;
  cc.cwd = request.cwd;
  cc.work_dir = work_dir;
  // nvcc's front ends read the clock at startup whatever the source says;
  // the record's nvcc rule decides (observed.cpp). SOURCE_DATE_EPOCH is not
  // taken as pinning: -ccbin may name a host compiler that ignores it.
  cc.nvcc = true;

  Plan plan;
  plan.kind = PlanKind::kCompiler;
  plan.direct_mode = true;
  plan.key_mode = KeyMode::kDirect;
  plan.flight_key = h.digest();
  plan.tool = "nvcc";
  plan.job_class = "nvcc";
  plan.run_program = request.program;
  plan.run_argv = request.argv;  // in place: nvcc writes the requester's own -o
  plan.run_cwd = request.cwd;
  plan.trace_path = work_dir + "/trace";
  plan.run_env = traced_environment(request, trace_library, plan.trace_path);
  plan.uses_work_dir = true;
  std::string output = absolute_path(args.output, request.cwd);
  plan.outputs.push_back({"out", output, output, false});
  plan.inputs.push_back(source_abs);
  detail->cc = std::move(cc);
  plan.detail = std::move(detail);
  return plan;
}

}  // namespace ccpool::compiler
