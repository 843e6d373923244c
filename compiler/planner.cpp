// Dispatch (which model handles a request), tool identity, the memo of
// helper runs, and the plan helpers every model uses (plan_helpers.h,
// verify_plan_inputs).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/fs.h"
#include "base/process_facts.h"
#include "compiler/ar_args.h"
#include "compiler/bounded.h"
#include "compiler/cc_name.h"
#include "compiler/key_hash.h"
#include "compiler/path_names.h"
#include "compiler/plan_helpers.h"
#include "compiler/planner_impl.h"

namespace ccpool::compiler {
namespace {

bool looks_like_cc(const std::string& name) {
  return is_cc_name(name);
}

constexpr size_t kMaxHelperMemo = 4096;

}  // namespace

int64_t to_ns(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

Plan passthrough_plan(const Request& request, std::string code, std::string reason) {
  Plan plan;
  plan.kind = PlanKind::kPassthrough;
  plan.reason = std::move(reason);
  plan.reason_code = std::move(code);
  run_as_given(plan, request);
  return plan;
}

void run_as_given(Plan& plan, const Request& request) {
  plan.tool = base_name(request.program);
  plan.job_class = plan.tool;
  plan.run_program = request.program;
  plan.run_argv = request.argv;
  plan.run_cwd = request.cwd;
  plan.run_env = environment_without_shim(request.env);
}

std::vector<std::string> traced_environment(const Request& request,
                                            const std::string& trace_library,
                                            const std::string& trace_path) {
  std::vector<std::string> env = environment_without_shim(request.env);
  std::string preload = trace_library;
  std::erase_if(env, [&](const std::string& e) {
    if (e.rfind("LD_PRELOAD=", 0) == 0) {
      if (e.size() > 11) preload += ":" + e.substr(11);
      return true;
    }
    return e.rfind("CCPOOL_TRACE=", 0) == 0;
  });
  env.push_back("LD_PRELOAD=" + preload);
  env.push_back("CCPOOL_TRACE=" + trace_path);
  return env;
}

WhyNot verify_plan_inputs(Planner::Impl& impl, const PlanDetail& detail,
                          std::chrono::system_clock::time_point started) {
  int64_t start_ns = to_ns(started);
  for (const auto& [path, stat] : detail.tools) {
    std::optional<FileStat> now = stat_path(path);
    if (!now || !(*now == stat))
      return {"tool_changed", "tool '" + path + "' changed since the plan"};
  }
  for (const CheckedInput& input : detail.inputs) {
    Result<HashedFile> now = impl.hasher.hash(input.path);
    if (!now) {
      return {"input_unreadable",
              "input '" + input.path + "' unreadable after the run: " + now.error().message};
    }
    if (now->content != input.content) {
      return {"input_changed_during_compile", "input '" + input.path + "' changed since the plan"};
    }
    if (now->stat.mtime_ns >= start_ns || now->stat.ctime_ns >= start_ns) {
      return {"input_changed_during_compile",
              "input '" + input.path + "' was modified during the run"};
    }
  }
  for (const std::string& path : detail.absent_paths) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0)
      return {"input_changed_during_compile", "'" + path + "' appeared during the run"};
  }
  return {};
}

std::string copy_seed_files(const Plan& plan) {
  for (const SeedFile& seed : plan.seeds) {
    UniqueFd in(::open(seed.from.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!in) return "cannot read '" + seed.from + "': " + std::strerror(errno);
    UniqueFd out(
        ::open(seed.to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!out) return "cannot create '" + seed.to + "': " + std::strerror(errno);
    Hasher hasher;  // the digest FileHasher gives the same bytes
    char buf[64 * 1024];
    for (;;) {
      ssize_t n = ::read(in.get(), buf, sizeof buf);
      if (n == 0) break;
      if (n < 0) {
        if (errno == EINTR) continue;
        return "cannot read '" + seed.from + "': " + std::strerror(errno);
      }
      std::string_view chunk(buf, static_cast<size_t>(n));
      hasher.update(chunk);
      if (Result<void> w = write_all(out.get(), chunk); !w) return w.error().message;
    }
    if (hasher.digest() != seed.content) return "'" + seed.from + "' changed since it was keyed";
  }
  return "";
}

Result<ToolIdentity> Planner::Impl::tool_identity(const std::string& path) {
  std::optional<std::string> resolved = real_path(path);
  if (!resolved) return make_error(ErrorCode::kNotFound, "cannot resolve tool '" + path + "'");
  ToolIdentity id;
  id.real_path = std::move(*resolved);
  CCPOOL_TRY_ASSIGN(HashedFile file, hasher.hash(id.real_path));
  id.content = file.content;
  id.stat = file.stat;
  Hasher h;
  h.add_field("tool-v1");
  h.add_field(id.real_path);
  hash_digest(h, id.content);
  id.key = h.digest();
  return id;
}

Result<HelperOutput> Planner::Impl::memo_helper(const Digest& key,
                                                const std::vector<std::string>& argv,
                                                const std::vector<std::string>& env,
                                                const std::string& cwd,
                                                const std::string& program) {
  return memo_helper(
      key, argv, [&env] { return env; }, cwd, program);
}

Result<HelperOutput> Planner::Impl::memo_helper(
    const Digest& key, const std::vector<std::string>& argv,
    const std::function<std::vector<std::string>()>& make_env, const std::string& cwd,
    const std::string& program) {
  {
    MutexLock lock(&mutex);
    auto it = helper_memo.find(key);
    if (it != helper_memo.end()) return it->second;
  }
  if (bounded::decline()) {
    return make_error(ErrorCode::kUnsupported, "a helper would run on a thread that must not wait");
  }
  CCPOOL_TRY_ASSIGN(HelperOutput out, run_helper(argv, environment_without_shim(make_env()), cwd,
                                                 std::chrono::seconds(30), program));
  MutexLock lock(&mutex);
  if (helper_memo.size() >= kMaxHelperMemo) helper_memo.clear();
  helper_memo.emplace(key, out);
  return out;
}

Family Planner::Impl::family(const ToolIdentity& tool, const std::vector<std::string>& env) {
  {
    MutexLock lock(&mutex);
    auto it = families.find(tool.key);
    if (it != families.end()) return it->second;
  }
  if (bounded::decline()) return Family::kUnknown;  // not asked: the caller hands the request on
  // LC_ALL=C: the banner must not be translated.
  std::vector<std::string> helper_env = {"LC_ALL=C"};
  if (std::optional<std::string> path = env_value(env, "PATH"))
    helper_env.push_back("PATH=" + *path);
  Result<HelperOutput> out = run_helper({tool.real_path, "--version"}, helper_env, "/");
  Family result = Family::kUnknown;
  if (out && out->exit_code == 0) {
    const std::string& text = out->out;
    if (text.find("clang version") != std::string::npos) {
      result = Family::kClang;
    } else if (text.find("Free Software Foundation") != std::string::npos &&
               (text.find("gcc") != std::string::npos || text.find("g++") != std::string::npos ||
                text.find("GCC") != std::string::npos)) {
      result = Family::kGcc;
    }
  }
  MutexLock lock(&mutex);
  families[tool.key] = result;
  return result;
}

namespace {

std::string find_trace_library(std::string configured) {
  if (!configured.empty()) return configured;
  if (std::optional<std::string> env = own_env("CCPOOL_TRACE_LIBRARY"); env && !env->empty())
    return *env;
  std::string exe_dir = own_executable_dir();
  if (exe_dir.empty()) return "";
  std::string candidate = exe_dir + "/../lib/libccpool-trace.so";
  return real_path(candidate).value_or("");
}

}  // namespace

Planner::Planner() : Planner(PlannerOptions{}) {}

Planner::Planner(PlannerOptions options) : m_impl(std::make_unique<Impl>()) {
  m_impl->trace_library = find_trace_library(std::move(options.trace_library));
  if (options.validation_memo) {
    ValidationMemo::Options memo;
    memo.drop_events = options.validation_memo_drops_events;
    m_impl->memo = ValidationMemo::create(std::move(memo));
  }
  m_impl->defer_lessons = options.defer_lessons;
  m_impl->max_lessons = std::max<size_t>(options.max_lessons, 1);
}
Planner::~Planner() = default;

size_t Planner::learn_lessons(const ManifestStorage& manifests,
                              const std::function<bool()>& keep_going) {
  Impl& impl = *m_impl;
  size_t taken = 0;
  while (keep_going()) {
    Impl::Lesson lesson;
    {
      MutexLock lock(&impl.mutex);
      if (impl.lessons.empty()) break;
      lesson = std::move(impl.lessons.front());
      impl.lessons.pop_front();
    }
    std::optional<std::string> blob =
        manifests.load ? manifests.load(lesson.flight_key) : std::nullopt;
    std::shared_ptr<const ParsedManifest> parsed =
        blob ? impl.parsed_manifest(lesson.flight_key, *blob) : nullptr;
    // Read back from the store: an entry whose key does not match is no
    // hit's either, and teaches nothing.
    if (parsed && !parsed->entries.empty() && parsed->entries.front().key_ok && lesson.own_view) {
      impl.learn_record(lesson.cwd, lesson.env, parsed->entries.front());
      impl.lessons_learned.fetch_add(1);
    } else {
      impl.lessons_unlearned.fetch_add(1);
    }
    ++taken;
  }
  return taken;
}

size_t Planner::pending_lessons() const {
  MutexLock lock(&m_impl->mutex);
  return m_impl->lessons.size();
}

Planner::Counters Planner::counters() const {
  Counters c{m_impl->manifest_parses.load(), m_impl->listings.reads()};
  c.lessons_learned = m_impl->lessons_learned.load();
  c.lessons_unlearned = m_impl->lessons_unlearned.load();
  c.lessons_dropped = m_impl->lessons_dropped.load();
  if (m_impl->memo) {
    ValidationMemo::Counters m = m_impl->memo->counters();
    c.memo_served = m.served;
    c.memo_learned = m.learned;
    c.memo_refused = m.refused;
    c.memo_deferred = m.deferred;
    c.memo_probes = m.probes;
    c.memo_rechecked = m.rechecked;
    c.memo_sets_served = m.sets_served;
    c.memo_resets = m.resets;
    c.memo_watches = m.watches;
  }
  return c;
}

bool Planner::has_validation_memo() const {
  return m_impl->memo != nullptr;
}

Result<Plan> Planner::plan(const Request& request, const std::string& work_dir) {
  if (request.argv.empty() || request.program.empty() || request.program[0] != '/') {
    return passthrough_plan(request, "no_absolute_program", "no absolute program path");
  }
  Result<ToolIdentity> tool = m_impl->tool_identity(request.program);
  if (!tool)
    return passthrough_plan(request, "tool_unknown",
                            "tool identity unknown: " + tool.error().message);
  std::string name = base_name(request.program);
  std::string real_name = base_name(tool->real_path);
  if (bounded::active() && (name == "ptxas" || real_name == "ptxas" || name == "nvcc" ||
                            real_name == "nvcc" || Impl::is_archiver_tool(real_name))) {
    bounded::decline();  // their models read archives and run probes: not on this thread
    return passthrough_plan(request, "bounded", "declined on a thread that must not wait");
  }
  if (name == "ptxas" || real_name == "ptxas") return m_impl->plan_ptxas(request, *tool);
  if (name == "nvcc" || real_name == "nvcc") return m_impl->plan_nvcc(request, *tool, work_dir);
  if (std::optional<Result<Plan>> archiver = m_impl->plan_archiver(request, *tool, work_dir))
    return std::move(*archiver);
  if (looks_like_cc(name) || looks_like_cc(real_name) ||
      looks_like_cc(base_name(request.argv[0]))) {
    Family family = m_impl->family(*tool, request.env);
    if (bounded::declined()) return passthrough_plan(request, "bounded", "declined");
    if (family != Family::kUnknown) return m_impl->plan_cc(request, *tool, family, work_dir);
  }
  if (!request.declared_outputs.empty()) return m_impl->plan_generic(request, *tool);
  return passthrough_plan(request, "not_a_compiler",
                          "not a recognised compiler and no declared outputs");
}

Result<std::optional<Digest>> Planner::lookup(const Plan& plan, const ManifestStorage& manifests) {
  if (plan.kind == PlanKind::kPassthrough) return std::optional<Digest>();
  if (!plan.direct_mode) return std::optional<Digest>(plan.flight_key);
  return m_impl->lookup_cc(plan, manifests);
}

Result<Finished> Planner::finish(const Plan& plan, std::chrono::system_clock::time_point started,
                                 const ManifestStorage& manifests) {
  RunFacts run;
  run.started = started;
  run.success = true;
  return finish(plan, run, manifests);
}

Result<Finished> Planner::finish(const Plan& plan, const RunFacts& run,
                                 const ManifestStorage& manifests) {
  std::chrono::system_clock::time_point started = run.started;
  Finished done;
  if (plan.kind == PlanKind::kPassthrough || !plan.detail) {
    done.why_not = "pass-through";
    done.why_not_code = "passthrough";
    return done;
  }
  if (plan.detail->archive_output) {
    for (const auto& [output, bytes] : run.outputs) {
      std::string why = archive_not_deterministic(bytes);
      if (!why.empty()) {
        done.why_not_code = "archive_not_deterministic";
        done.why_not = "archive: " + why;
        return done;
      }
    }
  }
  if (plan.detail->cc) return m_impl->finish_cc(plan, run, manifests);
  WhyNot why = verify_plan_inputs(*m_impl, *plan.detail, started);
  done.why_not = std::move(why.text);
  done.why_not_code = std::move(why.code);
  done.store = done.why_not_code.empty();
  if (done.store) done.result_key = plan.flight_key;
  return done;
}

Conclusion Planner::conclude(const Plan& plan, const RunFacts& run,
                             const ManifestStorage& manifests) {
  Conclusion out;
  if (plan.kind == PlanKind::kPassthrough) {
    out.finished.why_not = "pass-through";
    out.finished.why_not_code = "passthrough";
    return out;
  }
  // The manifest under the flight key is returned, to be stored after the
  // result it names; any other blob is saved as finish() makes it.
  ManifestStorage capture = manifests;
  capture.save = [&](const Digest& key, const std::string& bytes) {
    if (key == plan.flight_key) {
      out.manifest = bytes;
    } else if (manifests.save) {
      manifests.save(key, bytes);
    }
  };
  Result<Finished> finished = finish(plan, run, capture);
  if (!finished) {
    out.finished.why_not_code = "internal_error";
    out.finished.why_not = finished.error().message;
    return out;
  }
  out.finished = std::move(*finished);
  out.validated = out.finished.store;
  if (out.validated) {
    std::string blocker = replay_blocker(plan, run.stdout_data, run.stderr_data);
    if (!blocker.empty()) {
      out.validated = false;
      out.finished = Finished{};
      out.finished.why_not_code = "output_names_unkeyed_path";
      out.finished.why_not = blocker;
    }
  }
  if (out.finished.store && run.success && !run.outputs_complete) {
    out.finished.store = false;
    out.finished.why_not_code = "output_missing";
    out.finished.why_not = "an output is missing";
  }
  if (!run.success)
    out.finished.store = false;  // failures are never stored, only shared with joiners
  return out;
}

bool Planner::accepts(const Plan& joiner, const Conclusion& run) {
  if (!run.validated) return false;
  if (!joiner.direct_mode) return joiner.flight_key == run.finished.result_key;
  if (!run.manifest) return false;
  ManifestStorage leaders;
  leaders.load = [&](const Digest& key) -> std::optional<std::string> {
    if (key == joiner.flight_key) return run.manifest;
    return std::nullopt;
  };
  Result<std::optional<Digest>> key = lookup(joiner, leaders);
  return key && *key && **key == run.finished.result_key;
}

}  // namespace ccpool::compiler
