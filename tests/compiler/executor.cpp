#include "tests/compiler/executor.h"

#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/fs.h"
#include "compiler/subprocess.h"
#include "tests/support/scratch.h"

namespace ccpool::compiler::testing {

ManifestStorage MemoryStore::storage() {
  ManifestStorage s;
  s.load = [this](const Digest& key) -> std::optional<std::string> {
    auto it = manifests.find(key);
    if (it == manifests.end()) return std::nullopt;
    ++manifest_loads;
    return it->second;
  };
  s.content =
      [this](const Digest& key) -> std::optional<Digest> {  // as the service's store: no read
    auto it = manifests.find(key);
    if (it == manifests.end()) return std::nullopt;
    return hash_bytes(it->second);
  };
  s.save = [this](const Digest& key, const std::string& blob) { manifests[key] = blob; };
  return s;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_text(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

std::vector<std::string> base_env() {
  std::vector<std::string> env = {"PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C"};
  return env;
}

int run_direct(const std::vector<std::string>& argv, const std::string& cwd,
               const std::vector<std::string>& env, std::string* err, std::string* out_text) {
  std::string program = argv[0];
  if (program[0] != '/') program = "/usr/bin/" + program;
  Result<HelperOutput> out = run_helper(argv, env, cwd, std::chrono::seconds(120), program);
  if (!out) {
    ADD_FAILURE() << out.error().message;
    return -1;
  }
  if (err) *err = out->err;
  if (out_text) *out_text = out->out;
  return out->exit_code;
}

Outcome execute(Planner& planner, MemoryStore& store, const Request& request,
                const std::function<void()>& before_finish) {
  static std::atomic<int> counter{0};
  Outcome o;
  std::string work = ::ccpool::testing::scratch_dir() + "/work." + std::to_string(++counter);
  Result<Plan> plan = planner.plan(request, work);
  if (!plan) {
    ADD_FAILURE() << plan.error().message;
    return o;
  }
  o.plan = *plan;
  ManifestStorage manifests = store.storage();
  if (plan->kind != PlanKind::kPassthrough) {
    Result<std::optional<Digest>> key = planner.lookup(*plan, manifests);
    EXPECT_TRUE(key.has_value());
    if (key && *key && store.results.count(**key)) {
      const Record& rec = store.results[**key];
      for (const OutputSpec& out : plan->outputs) {
        auto it = rec.files.find(out.name);
        if (it == rec.files.end()) continue;
        write_text(out.deliver_path,
                   planner.deliver_bytes(*plan, out, it->second).value_or(it->second));
      }
      o.hit = true;
      o.stdout_text = rec.stdout_text;
      o.stderr_text = rec.stderr_text;
      ++store.hits;
      return o;
    }
  } else {
    ++store.passthroughs;
  }
  if (plan->uses_work_dir) std::filesystem::create_directories(work);
  if (!plan->trace_path.empty()) write_text(plan->trace_path, "");
  if (std::string why = copy_seed_files(*plan); !why.empty()) ADD_FAILURE() << why;
  auto started = std::chrono::system_clock::now();
  Result<HelperOutput> ran = run_helper(plan->run_argv, plan->run_env, plan->run_cwd,
                                        std::chrono::seconds(120), plan->run_program);
  ++store.executions;
  if (!ran) {
    ADD_FAILURE() << ran.error().message;
    return o;
  }
  o.exit_code = ran->exit_code;
  o.stdout_text = ran->out;
  o.stderr_text = ran->err;
  if (!plan->trace_path.empty()) o.trace = read_text(plan->trace_path);
  if (plan->kind != PlanKind::kPassthrough) {
    if (before_finish) before_finish();
    // What the service's collect does: read the outputs, conclude, store
    // (result, then manifest), deliver.
    RunFacts facts;
    facts.started = started;
    facts.success = ran->exit_code == 0;
    facts.stdout_data = ran->out;
    facts.stderr_data = ran->err;
    Record rec;
    rec.stdout_text = ran->out;
    rec.stderr_text = ran->err;
    for (const OutputSpec& out : plan->outputs) {
      if (!facts.success) break;
      if (!path_exists(out.run_path)) {
        if (!out.optional) facts.outputs_complete = false;
        EXPECT_TRUE(out.optional) << "missing output " << out.run_path;
        continue;
      }
      rec.files[out.name] = read_text(out.run_path);
      facts.outputs.emplace_back(out.name, rec.files[out.name]);
    }
    Conclusion done = planner.conclude(*plan, facts, manifests);
    o.conclusion = done;
    if (facts.success) {
      for (const OutputSpec& out : plan->outputs) {
        if (!rec.files.count(out.name) || out.run_path == out.deliver_path) continue;
        const std::string& stored = rec.files[out.name];
        write_text(out.deliver_path, planner.deliver_bytes(*plan, out, stored).value_or(stored));
        ::chmod(out.deliver_path.c_str(), 0755);
      }
    }
    if (done.finished.store) {
      store.results[done.finished.result_key] = rec;
      if (done.manifest) store.manifests[plan->flight_key] = *done.manifest;
      o.stored = true;
      o.mode = done.finished.mode;
    } else {
      o.why_not = done.finished.why_not;
      o.why_not_code = done.finished.why_not_code;
    }
  }
  if (plan->uses_work_dir) remove_tree(work);
  return o;
}

}  // namespace ccpool::compiler::testing
