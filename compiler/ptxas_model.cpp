// ptxas (Triton's PTX -> cubin step): identity, every argument, the content of
// the single .ptx input. Outputs run in place: -o is keyed (it is an
// argument) and ranks that want the cubin at different paths simply miss.
#include <set>

#include "compiler/planner_impl.h"

namespace ccpool::compiler {
namespace {

// Options whose value is the next argument when not written with '='.
const std::set<std::string> kWithValue = {
    "-o", "--output-file", "-arch", "--gpu-name", "-m", "--machine", "-maxrregcount",
    "--maxrregcount", "-e", "--entry", "-O", "--opt-level", "-dlcm", "--def-load-cache",
    "-dscm", "--def-store-cache", "-fmad", "--fmad", "-g", "-minnctapersm",
    "--minnctapersm", "-maxntid", "--maxntid", "--suppress-debug-info"};
// Options that read further files or write undeclared ones: never cached.
const std::set<std::string> kRefused = {"--options-file", "-optf", "--compile-as-tools-patch",
                                        "-c", "--compile-only", "--input-as-string", "-ias"};

}  // namespace

Result<Plan> Planner::Impl::plan_ptxas(const Request& request, const ToolIdentity& tool) {
  std::string output;
  std::vector<std::string> positionals;
  const std::vector<std::string>& argv = request.argv;
  for (size_t i = 1; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    std::string name = arg.substr(0, arg.find('='));
    if (kRefused.count(name)) {
      return passthrough_plan(request, reason_code("unsupported_option", name),
                              "ptxas option " + name + " not cacheable");
    }
    if (arg.empty() || arg[0] != '-') {
      positionals.push_back(arg);
      continue;
    }
    if (kWithValue.count(arg)) {
      if (i + 1 >= argv.size()) {
        return passthrough_plan(request, reason_code("option_missing_value", arg),
                                "ptxas option " + arg + " lacks a value");
      }
      if (arg == "-o" || arg == "--output-file") output = argv[i + 1];
      ++i;
    } else if (name == "--output-file" || name == "-o") {
      output = arg.substr(arg.find('=') + 1);
    }
  }
  if (positionals.size() != 1 || positionals[0].size() < 5 ||
      positionals[0].compare(positionals[0].size() - 4, 4, ".ptx") != 0) {
    return passthrough_plan(request, "ptxas_inputs", "ptxas needs exactly one .ptx input");
  }
  if (output.empty() || output == "-") {
    return passthrough_plan(request, "ptxas_no_output", "ptxas without -o FILE");
  }

  auto detail = std::make_shared<PlanDetail>();
  detail->tools.emplace_back(tool.real_path, tool.stat);
  std::string input = absolute_path(positionals[0], request.cwd);
  Result<HashedFile> file = hasher.hash(input);
  if (!file) {
    return passthrough_plan(request, "source_unreadable", "ptxas input: " + file.error().message);
  }
  detail->inputs.push_back({input, file->content});

  Hasher h;
  h.add_field("ccpool-ptxas-v1");
  hash_digest(h, tool.key);
  h.add_field(request.program);
  h.add_u64(argv.size());
  for (const std::string& arg : argv) h.add_field(arg);
  h.add_field(request.cwd);  // relative -o / input paths resolve against it
  hash_env(h, request.env, generic_env_names());
  h.add_field(input);
  hash_digest(h, file->content);

  Plan plan;
  plan.kind = PlanKind::kCompiler;
  plan.flight_key = h.digest();
  plan.tool = "ptxas";
  plan.job_class = "ptxas";
  plan.run_program = request.program;
  plan.run_argv = argv;
  plan.run_cwd = request.cwd;
  plan.run_env = environment_without_shim(request.env);
  std::string out_abs = absolute_path(output, request.cwd);
  plan.outputs.push_back({"out", out_abs, out_abs, false});
  plan.inputs.push_back(input);
  plan.detail = std::move(detail);
  return plan;
}

}  // namespace ccpool::compiler
