#include "compiler/cc_probe.h"

#include <sys/stat.h>

#include "base/fs.h"
#include "base/process.h"
#include "compiler/key_hash.h"
#include "compiler/planner_impl.h"
#include "compiler/probe_output.h"

namespace ccpool::compiler {
namespace {

// Environment that changes what the driver searches or links.
const std::vector<std::string> kProbeEnv = {
    "CPATH",        "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "OBJC_INCLUDE_PATH",
    "LIBRARY_PATH", "COMPILER_PATH",  "GCC_EXEC_PREFIX",    "CCC_OVERRIDE_OPTIONS",
    "PATH",         "LD_LIBRARY_PATH"};

Digest probe_key(const ProbeContext& ctx, std::string_view kind,
                 const std::vector<std::string>& argv) {
  Hasher h;
  h.add_field(kind);
  hash_digest(h, ctx.tool.key);
  h.add_field(ctx.request.program);
  h.add_field(ctx.request.cwd);
  h.add_u64(argv.size());
  for (const std::string& a : argv) h.add_field(a);
  hash_env(h, ctx.request.env, kProbeEnv);
  return h.digest();
}

}  // namespace

std::vector<std::string> helper_env(const std::vector<std::string>& env) {
  std::vector<std::string> out;
  for (const std::string& kv : environment_without_shim(env)) {
    if (kv.rfind("LC_", 0) == 0 || kv.rfind("LANG=", 0) == 0 || kv.rfind("LANGUAGE=", 0) == 0)
      continue;
    out.push_back(kv);
  }
  out.push_back("LC_ALL=C");
  return out;
}

namespace {

// The request's environment as a helper's, built only if a memo misses.
std::function<std::vector<std::string>()> helper_env_of(const ProbeContext& ctx) {
  return [&ctx] { return helper_env(ctx.request.env); };
}

}  // namespace

Result<std::string> probe_native(const ProbeContext& ctx) {
  std::vector<std::string> argv = {ctx.request.argv[0], "-###", "-E", "-"};
  argv.insert(argv.end(), ctx.args.native_args.begin(), ctx.args.native_args.end());
  Digest key = probe_key(ctx, "native", argv);
  CCPOOL_TRY_ASSIGN(HelperOutput out, ctx.impl.memo_helper(key, argv, helper_env_of(ctx),
                                                           ctx.request.cwd, ctx.request.program));
  if (out.exit_code != 0 || out.err.empty()) {
    return make_error(ErrorCode::kUnsupported, "-march=native probe failed");
  }
  return out.err;
}

}  // namespace ccpool::compiler
