// `ccpool explain -- COMMAND...`: what the service would do with COMMAND, run
// from here, without running it: whether it is cacheable, the key inputs, the
// reason code when not, and (when a store is there) whether it would hit.
// Planning may run the compiler's own probes (`--version`, `-###` for
// -march=native; nvcc's `--dryrun`) and an nvcc lookup its `-E` steps, never
// the compile. JSON keys: docs/cli.md.
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "base/paths.h"
#include "cache/store.h"
#include "cli/cache_format.h"
#include "cli/commands.h"
#include "client/request.h"
#include "compiler/planner.h"

namespace ccpool::cli {
namespace {

struct ExplainFlags {
  std::string dir;
  bool json = false;
  std::vector<std::string> command;
};

// The rule the result key is made by, as docs/cache-keys.md names it.
const char* mode_text(compiler::KeyMode mode) {
  switch (mode) {
    case compiler::KeyMode::kDirect:
      return "record";
    case compiler::KeyMode::kExact:
      break;
  }
  return "exact";
}

const char* kind_text(compiler::PlanKind kind) {
  switch (kind) {
    case compiler::PlanKind::kCompiler:
      return "compiler";
    case compiler::PlanKind::kGeneric:
      return "declared";
    case compiler::PlanKind::kPassthrough:
      break;
  }
  return "passthrough";
}

// "hit", "miss" or why the store could not be asked.
std::string store_answer(compiler::Planner& planner, const compiler::Plan& plan,
                         const std::string& dir) {
  cache::StoreOptions options;
  options.dir = default_store_dir(dir);
  options.create_if_missing = false;
  auto store = cache::Store::open(options);
  if (!store) return "unknown (no store at '" + options.dir + "')";
  compiler::ManifestStorage manifests;
  manifests.load = [&](const Digest& key) -> std::optional<std::string> {
    auto e = (*store)->peek(key, true);
    if (!e || !*e || (*e)->kind != cache::EntryKind::kBlob || (*e)->outputs.empty())
      return std::nullopt;
    return (*e)->outputs.front().data;
  };
  auto key = planner.lookup(plan, manifests);
  if (!key) return "unknown (" + key.error().message + ")";
  if (!*key) return "miss";
  auto entry = (*store)->peek(**key, false);
  if (!entry || !*entry) return "miss";
  return (*entry)->label.empty() ? "hit" : "hit (" + (*entry)->label + ")";
}

void explain(const ExplainFlags& flags) {
  if (flags.command.empty())
    fail(kExitUsage, "no command given; usage: ccpool explain [--json] -- COMPILER ARGS...");
  char cwd[4096];
  if (::getcwd(cwd, sizeof cwd) == nullptr) fail(kExitError, "cannot read the current directory");
  auto program = client::resolve_program(flags.command[0], cwd, client::current_environment());
  if (!program) fail(kExitUsage, program.error().message);
  auto built = client::build_request(*program, flags.command, {}, {});
  if (!built) fail(kExitError, built.error().message);
  compiler::Request request;
  request.program = built->program;
  request.argv = built->argv;
  request.cwd = built->cwd;
  request.env = built->env;
  compiler::Planner planner;
  // Never created: explain does not run the command.
  std::string work_dir = "/nonexistent/ccpool-explain/" + std::to_string(::getpid());
  auto plan = planner.plan(request, work_dir);
  if (!plan) fail(kExitError, "cannot plan this command: " + plan.error().message);
  bool cacheable = plan->kind != compiler::PlanKind::kPassthrough;
  nlohmann::json j;
  j["program"] = request.program;
  j["cwd"] = request.cwd;
  j["cacheable"] = cacheable;
  j["kind"] = kind_text(plan->kind);
  j["reason_code"] = plan->reason_code;
  j["reason"] = plan->reason;
  if (cacheable) {
    j["mode"] = mode_text(plan->key_mode);
    j["key"] = plan->flight_key.hex();
    j["tool"] = plan->tool;
    j["job_class"] = plan->job_class;
    j["inputs"] = plan->inputs;
    std::vector<std::string> run_argv = plan->run_argv;
    for (std::string& a : run_argv) {
      if (a.compare(0, work_dir.size(), work_dir) == 0) a = "<work>" + a.substr(work_dir.size());
    }
    j["run_argv"] = run_argv;
    nlohmann::json outputs = nlohmann::json::array();
    for (const auto& o : plan->outputs) {
      outputs.push_back({{"name", o.name}, {"path", o.deliver_path}, {"optional", o.optional}});
    }
    j["outputs"] = outputs;
    j["store"] = store_answer(planner, *plan, flags.dir);
  }
  if (flags.json) {
    print_json(j);
    return;
  }
  std::printf("command     %s (in %s)\n", request.program.c_str(), request.cwd.c_str());
  if (!cacheable) {
    std::printf("cacheable   no: %s\nreason      %s\n", plan->reason_code.c_str(),
                plan->reason.c_str());
    return;
  }
  std::printf("cacheable   yes (%s, %s mode)\n", kind_text(plan->kind), mode_text(plan->key_mode));
  std::printf("key         %s\n", plan->flight_key.hex().c_str());
  std::printf("job class   %s\n", plan->job_class.c_str());
  for (const auto& in : plan->inputs) std::printf("input       %s\n", in.c_str());
  for (const auto& o : plan->outputs) {
    std::printf("output      %s -> %s%s\n", o.name.c_str(), o.deliver_path.c_str(),
                o.optional ? " (optional)" : "");
  }
  std::string run;
  for (const auto& a : j["run_argv"]) run += (run.empty() ? "" : " ") + a.get<std::string>();
  std::printf("runs        %s\n", run.c_str());
  std::printf("store       %s\n", j["store"].get<std::string>().c_str());
  if (plan->key_mode == compiler::KeyMode::kDirect) {
    std::printf(
        "note        the run is recorded (libccpool-trace.so): every file it reads, every lookup "
        "and\n"
        "            variable; a hit needs each to answer the same here. Whether a result is "
        "stored is\n"
        "            decided after the run (not_stored reason codes, docs/cache-keys.md)\n");
  }
}

}  // namespace

void register_explain_command(CLI::App& app) {
  auto flags = std::make_shared<ExplainFlags>();
  CLI::App* cmd = app.add_subcommand("explain",
                                     "Say whether a command would be cached, its key inputs and "
                                     "the reason when not (runs nothing)");
  cmd->add_option(
      "--dir", flags->dir,
      "store directory to look the key up in (default: $CCPOOL_DIR, else ~/.cache/ccpool)");
  cmd->add_flag("--json", flags->json, "print one JSON object (keys in docs/cli.md)");
  cmd->add_option("command", flags->command, "-- COMPILER ARGS...");
  cmd->prefix_command();
  cmd->callback([flags] { explain(*flags); });
}

}  // namespace ccpool::cli
