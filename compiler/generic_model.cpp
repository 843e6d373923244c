// The generic declared-job model (`ccpool exec --input F --output F -- CMD`):
// an action keyed like a Bazel action. See docs/cache-keys.md, "Generic jobs".
#include <sys/stat.h>

#include "base/process_facts.h"
#include "compiler/key_hash.h"
#include "compiler/path_names.h"
#include "compiler/plan_helpers.h"
#include "compiler/planner_impl.h"

namespace ccpool::compiler {
namespace {

// Environment that reaches a generic tool's output in ways we can name:
// locale and time zone (messages, dates, collation), reproducible-build
// pinning, and the lookup paths a script uses to find the programs and
// modules it runs. CCPOOL_KEY_ENV=A,B adds more names per request.
const std::vector<std::string> kGenericEnv = {
    "PATH",       "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONHASHSEED",    "LANG",
    "LANGUAGE",   "LC_ALL",          "LC_COLLATE", "LC_CTYPE",          "LC_MESSAGES",
    "LC_NUMERIC", "LC_TIME",         "TZ",         "SOURCE_DATE_EPOCH", "CCPOOL_KEY_ENV"};

std::vector<std::string> extra_env_names(const std::vector<std::string>& env) {
  std::vector<std::string> names;
  std::optional<std::string> list = env_value(env, "CCPOOL_KEY_ENV");
  if (!list) return names;
  size_t i = 0;
  while (i <= list->size()) {
    size_t j = list->find(',', i);
    if (j == std::string::npos) j = list->size();
    if (j > i) names.push_back(list->substr(i, j - i));
    i = j + 1;
  }
  return names;
}

}  // namespace

const std::vector<std::string>& generic_env_names() {
  return kGenericEnv;
}

Result<Plan> Planner::Impl::plan_generic(const Request& request, const ToolIdentity& tool) {
  auto detail = std::make_shared<PlanDetail>();
  detail->tools.emplace_back(tool.real_path, tool.stat);
  Hasher h;
  h.add_field("ccpool-generic-v1");
  h.update(std::string_view(reinterpret_cast<const char*>(tool.key.bytes.data()), 16));
  h.add_field(request.program);
  h.add_u64(request.argv.size());
  for (const std::string& arg : request.argv) h.add_field(arg);
  h.add_field(request.cwd);
  hash_env(h, request.env, kGenericEnv);
  hash_env(h, request.env, extra_env_names(request.env));

  Plan plan;
  h.add_u64(request.declared_inputs.size());
  for (const std::string& input : request.declared_inputs) {
    std::string path = absolute_path(input, request.cwd);
    Result<HashedFile> file = hasher.hash(path);
    if (!file) {
      return passthrough_plan(request, "declared_input_unreadable",
                              "declared input: " + file.error().message);
    }
    h.add_field(path);
    h.update(std::string_view(reinterpret_cast<const char*>(file->content.bytes.data()), 16));
    detail->inputs.push_back({path, file->content});
    plan.inputs.push_back(path);
  }
  h.add_u64(request.declared_outputs.size());
  for (const std::string& output : request.declared_outputs) {
    std::string path = absolute_path(output, request.cwd);
    h.add_field(path);
    plan.outputs.push_back({path, path, path, false});
  }
  plan.kind = PlanKind::kGeneric;
  plan.flight_key = h.digest();
  run_as_given(plan, request);
  plan.detail = std::move(detail);
  return plan;
}

}  // namespace ccpool::compiler
