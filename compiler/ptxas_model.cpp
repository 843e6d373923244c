// ptxas (Triton's PTX -> cubin step), keyed by content: tool identity, the
// arguments with the input and the -o path replaced by placeholders, the
// generic environment allowlist and the content of the single .ptx input.
// Triton writes the PTX to a fresh NamedTemporaryFile for every compile, so a
// key holding the path would never hit.
//
// Why the paths may leave the key: for every option accepted below, the same
// PTX under two temp names gives byte-identical cubins with ptxas 12.8
// (Triton's) and 13.0 (the toolkit's); see docs/cache-keys.md and
// tests/torch/ptxas_test.py. -g/--device-debug is the exception (13.0 writes
// the input path into the debug info), so it passes through, as does every
// option not in the table. What ptxas prints can name the input path
// (warnings: "ptxas /tmp/x.ptx, line 7; warning : ..."): those paths are
// listed in PlanDetail::unkeyed_texts, and a run whose output contains one is
// not stored (Planner::replay_blocker).
#include <string_view>

#include "compiler/key_hash.h"
#include "compiler/path_names.h"
#include "compiler/plan_helpers.h"
#include "compiler/planner_impl.h"
#include "compiler/reason_code.h"

namespace ccpool::compiler {
namespace {

enum class ArgForm {
  kFlag,      // no value
  kValue,     // "-x V" or "-x=V"
  kAttached,  // only "-O3" / "-O=3": ptxas reads "-O 3" as -O plus an input file named 3
};
enum class Use {
  kKeyed,    // its text is keyed; it cannot make the paths reach the output
  kRefused,  // pass through, with `why`
};

struct PtxasOption {
  std::string_view name;
  ArgForm form;
  Use use = Use::kKeyed;
  std::string_view why = {};
};

constexpr std::string_view kDebug = "writes the input path into the cubin's debug info";
constexpr std::string_view kNoCubin = "produces no cubin";

// Every spelling ptxas 12.8 and 13.0 accept, long and short (ptxas --help),
// plus the hidden --regAllocOptLevel that Triton passes and the -m64 that nvcc
// passes. Anything else passes
// through: a misread option could hide a file ptxas reads.
constexpr PtxasOption kOptions[] = {
    {"--Ofast-compile", ArgForm::kValue},
    {"-Ofc", ArgForm::kValue},
    {"--allow-expensive-optimizations", ArgForm::kValue},
    {"-allow-expensive-optimizations", ArgForm::kValue},
    {"--compile-as-tools-patch", ArgForm::kFlag, Use::kRefused, "builds a tools patch"},
    {"-astoolspatch", ArgForm::kFlag, Use::kRefused, "builds a tools patch"},
    {"--compile-only", ArgForm::kFlag},
    {"-c", ArgForm::kFlag},
    {"--compiler-annotations", ArgForm::kFlag},
    {"-annotate", ArgForm::kFlag},
    {"--def-load-cache", ArgForm::kValue},
    {"-dlcm", ArgForm::kValue},
    {"--def-store-cache", ArgForm::kValue},
    {"-dscm", ArgForm::kValue},
    {"--device-debug", ArgForm::kFlag, Use::kRefused, kDebug},
    {"-g", ArgForm::kFlag, Use::kRefused, kDebug},
    {"--device-function-maxrregcount", ArgForm::kValue},
    {"-func-maxrregcount", ArgForm::kValue},
    {"--device-stack-protector", ArgForm::kValue},
    {"-device-stack-protector", ArgForm::kValue},
    {"--disable-optimizer-constants", ArgForm::kFlag},
    {"-disable-optimizer-consts", ArgForm::kFlag},
    {"--disable-warnings", ArgForm::kFlag},
    {"-w", ArgForm::kFlag},
    {"--dont-merge-basicblocks", ArgForm::kFlag},
    {"-no-bb-merge", ArgForm::kFlag},
    {"--entry", ArgForm::kValue},
    {"-e", ArgForm::kValue},
    {"--extensible-whole-program", ArgForm::kFlag},
    {"-ewp", ArgForm::kFlag},
    {"--fmad", ArgForm::kValue},
    {"-fmad", ArgForm::kValue},
    {"--force-load-cache", ArgForm::kValue},
    {"-flcm", ArgForm::kValue},
    {"--force-store-cache", ArgForm::kValue},
    {"-fscm", ArgForm::kValue},
    {"--g-tensor-memory-access-check", ArgForm::kFlag},
    {"-g-tmem-access-check", ArgForm::kFlag},
    {"--generate-line-info", ArgForm::kFlag},
    {"-lineinfo", ArgForm::kFlag},
    {"--gno-tensor-memory-access-check", ArgForm::kFlag},
    {"-gno-tmem-access-check", ArgForm::kFlag},
    {"--gpu-name", ArgForm::kValue},
    {"-arch", ArgForm::kValue},
    {"--help", ArgForm::kFlag, Use::kRefused, kNoCubin},
    {"-h", ArgForm::kFlag, Use::kRefused, kNoCubin},
    {"--input-as-string", ArgForm::kValue, Use::kRefused, "takes its PTX from the command line"},
    {"-ias", ArgForm::kValue, Use::kRefused, "takes its PTX from the command line"},
    {"--legacy-bar-warp-wide-behavior", ArgForm::kFlag},
    {"-legacy-bar-warp-wide-behavior", ArgForm::kFlag},
    {"--list-version", ArgForm::kFlag, Use::kRefused, kNoCubin},
    {"-version-ls", ArgForm::kFlag, Use::kRefused, kNoCubin},
    {"--machine", ArgForm::kValue},
    {"-m", ArgForm::kValue},
    {"-m64", ArgForm::kFlag},  // nvcc's spelling; byte-identical to "-m 64"
    {"--make-errors-visible-at-exit", ArgForm::kFlag},
    {"-make-errors-visible-at-exit", ArgForm::kFlag},
    {"--maxntid", ArgForm::kValue},
    {"-maxntid", ArgForm::kValue},
    {"--maxrregcount", ArgForm::kValue},
    {"-maxrregcount", ArgForm::kValue},
    {"--minnctapersm", ArgForm::kValue},
    {"-minnctapersm", ArgForm::kValue},
    {"--opt-level", ArgForm::kValue},
    {"-O", ArgForm::kAttached},
    {"--optimize-float-atomics", ArgForm::kFlag},
    {"-opt-fp-atomics", ArgForm::kFlag},
    {"--options-file", ArgForm::kValue, Use::kRefused, "reads options from a file"},
    {"-optf", ArgForm::kValue, Use::kRefused, "reads options from a file"},
    {"--output-file", ArgForm::kValue},
    {"-o", ArgForm::kValue},
    {"--override-directive-values", ArgForm::kFlag},
    {"-override-directive-values", ArgForm::kFlag},
    {"--position-independent-code", ArgForm::kValue},
    {"-pic", ArgForm::kValue},
    {"--preserve-relocs", ArgForm::kFlag},
    {"-preserve-relocs", ArgForm::kFlag},
    {"--register-usage-level", ArgForm::kValue},
    {"-regUsageLevel", ArgForm::kValue},
    {"--return-at-end", ArgForm::kFlag},
    {"-ret-end", ArgForm::kFlag},
    {"--sanitize", ArgForm::kValue},
    {"-sanitize", ArgForm::kValue},
    {"--sp-bounds-check", ArgForm::kFlag},
    {"-sp-bounds-check", ArgForm::kFlag},
    {"--split-compile", ArgForm::kValue},
    {"-split-compile", ArgForm::kValue},
    {"--suppress-async-bulk-multicast-advisory-warning", ArgForm::kFlag},
    {"-suppress-async-bulk-multicast-advisory-warning", ArgForm::kFlag},
    {"--suppress-debug-info", ArgForm::kFlag},
    {"-suppress-debug-info", ArgForm::kFlag},
    {"--suppress-double-demote-warning", ArgForm::kFlag},
    {"-suppress-double-demote-warning", ArgForm::kFlag},
    {"--suppress-sparse-mma-advisory-info", ArgForm::kFlag},
    {"-suppress-sparse-mma-advisory-info", ArgForm::kFlag},
    {"--suppress-stack-size-warning", ArgForm::kFlag},
    {"-suppress-stack-size-warning", ArgForm::kFlag},
    {"--verbose", ArgForm::kFlag},
    {"-v", ArgForm::kFlag},
    {"--version", ArgForm::kFlag, Use::kRefused, kNoCubin},
    {"-V", ArgForm::kFlag, Use::kRefused, kNoCubin},
    {"--warn-on-double-precision-use", ArgForm::kFlag},
    {"-warn-double-usage", ArgForm::kFlag},
    {"--warn-on-local-memory-usage", ArgForm::kFlag},
    {"-warn-lmem-usage", ArgForm::kFlag},
    {"--warn-on-spills", ArgForm::kFlag},
    {"-warn-spills", ArgForm::kFlag},
    {"--warning-as-error", ArgForm::kFlag},
    {"-Werror", ArgForm::kFlag},
    {"--regAllocOptLevel", ArgForm::kValue},
    {"-regAllocOptLevel", ArgForm::kValue},
};

const PtxasOption* find_option(std::string_view name) {
  for (const PtxasOption& option : kOptions) {
    if (option.name == name) return &option;
  }
  return nullptr;
}

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// "-O3" and "-O=3": the only spellings of the short -O.
bool attached_opt_level(std::string_view arg) {
  if (arg.substr(0, 2) != "-O") return false;
  std::string_view rest = arg.substr(2);
  if (!rest.empty() && rest[0] == '=') rest = rest.substr(1);
  return all_digits(rest);
}

// Placeholders for the paths left out of the key. argv strings never hold a
// NUL, so no real argument can equal them.
const std::string kInputMark("\0input", 6);
const std::string kOutputMark("\0output", 7);

struct ParsedPtxas {
  std::string refused;                // non-empty: pass through, this is why
  std::string refused_code;           // its stable reason code (docs/cache-keys.md)
  std::vector<std::string> key_args;  // argv[1..] with the paths replaced by marks
  std::string input, output;          // as written
};

ParsedPtxas parse_ptxas(const std::vector<std::string>& argv) {
  ParsedPtxas p;
  auto refuse = [&](std::string code, std::string why) {
    p.refused_code = std::move(code);
    p.refused = std::move(why);
    return p;
  };
  for (size_t i = 1; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (arg.size() < 2 || arg[0] != '-') {
      if (!p.input.empty()) return refuse("ptxas_inputs", "ptxas with more than one input");
      p.input = arg;
      p.key_args.push_back(kInputMark);
      continue;
    }
    if (attached_opt_level(arg) && !find_option(arg)) {
      p.key_args.push_back(arg);
      continue;
    }
    size_t eq = arg.find('=');
    std::string name = arg.substr(0, eq);
    const PtxasOption* option = find_option(name);
    if (option == nullptr || option->form == ArgForm::kAttached) {
      return refuse(reason_code("unknown_option", name),
                    "ptxas option " + arg + " is not known to be cacheable");
    }
    if (option->use == Use::kRefused) {
      return refuse(reason_code("unsupported_option", name),
                    "ptxas " + name + " " + std::string(option->why));
    }
    if (option->form == ArgForm::kFlag) {
      if (eq != std::string::npos) {
        return refuse(reason_code("unknown_option", name),
                      "ptxas option " + arg + " takes no value");
      }
      p.key_args.push_back(arg);
      continue;
    }
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < argv.size()) {
      value = argv[++i];
    } else {
      return refuse(reason_code("option_missing_value", arg),
                    "ptxas option " + arg + " lacks a value");
    }
    if (name == "-o" || name == "--output-file") {
      if (!p.output.empty()) return refuse("ptxas_no_output", "ptxas with more than one -o");
      p.output = value;
      p.key_args.push_back(name);
      p.key_args.push_back(kOutputMark);
      continue;
    }
    p.key_args.push_back(name);
    p.key_args.push_back(value);
  }
  if (p.input.size() < 5 || p.input.compare(p.input.size() - 4, 4, ".ptx") != 0) {
    return refuse("ptxas_inputs", "ptxas needs exactly one .ptx input");
  }
  if (p.output.empty() || p.output == "-")
    return refuse("ptxas_no_output", "ptxas without -o FILE");
  return p;
}

}  // namespace

Result<Plan> Planner::Impl::plan_ptxas(const Request& request, const ToolIdentity& tool) {
  ParsedPtxas parsed = parse_ptxas(request.argv);
  if (!parsed.refused.empty())
    return passthrough_plan(request, parsed.refused_code, parsed.refused);
  std::string input = absolute_path(parsed.input, request.cwd);
  std::string output = absolute_path(parsed.output, request.cwd);
  if (input == output)
    return passthrough_plan(request, "ptxas_no_output", "ptxas -o names its own input");

  auto detail = std::make_shared<PlanDetail>();
  detail->tools.emplace_back(tool.real_path, tool.stat);
  Result<HashedFile> file = hasher.hash(input);
  if (!file)
    return passthrough_plan(request, "source_unreadable", "ptxas input: " + file.error().message);
  detail->inputs.push_back({input, file->content});
  detail->unkeyed_texts = {parsed.input, parsed.output, input, output};

  Hasher h;
  hash_tool_head(h, "ccpool-ptxas-v2", tool.key, request.program, request.argv[0]);
  h.add_u64(parsed.key_args.size());
  for (const std::string& arg : parsed.key_args) h.add_field(arg);
  hash_env(h, request.env, generic_env_names());
  hash_digest(h, file->content);

  Plan plan;
  plan.kind = PlanKind::kCompiler;
  plan.flight_key = h.digest();
  plan.tool = "ptxas";
  plan.job_class = "ptxas";
  plan.run_program = request.program;
  plan.run_argv = request.argv;  // in place: the leader's own paths, as a direct run
  plan.run_cwd = request.cwd;
  plan.run_env = environment_without_shim(request.env);
  plan.outputs.push_back({"out", output, output, false});
  plan.inputs.push_back(input);
  plan.detail = std::move(detail);
  return plan;
}

}  // namespace ccpool::compiler
