// Preprocessor mode: the fallback for single-source C/C++ compiles that
// direct mode cannot prove (today: `__has_include` whose probes the manifest
// cannot record). Direct mode always goes first.
//
// Key = H(direct key, the compiler's -E output, the content of every file
// the -E output names in its line markers). The direct key already holds the
// tool identity, every flag (those that reach the preprocessor and those that
// only reach later stages), the cwd where it matters and the source; the -E
// output adds what the preprocessor decided (include resolution,
// `__has_include` answers, macro expansion); the file contents add what -E
// drops but the object or the diagnostics keep (comments and layout: debug
// columns, `source_location`, caret lines).
//
// Never used where -E output does not determine the result: the -E runs with
// `-Wdate-time -Wsystem-headers -Wno-error`, and any expansion of `__TIME__`,
// `__DATE__` or `__TIMESTAMP__` (including one built by token pasting) is
// reported by the compiler; gcc with SOURCE_DATE_EPOCH pins the first two
// (then their values are in the -E text). Also refused: `-w` (it would hide
// that warning), a `date-time` diagnostic pragma, `incbin` anywhere.
//
// When: a "marker" blob under H(tool, language, search dirs) says some
// compile in this context needed the fallback. lookup() then runs -E after a
// direct-mode miss (a hit costs that one preprocessor run) and remembers the
// key; finish() runs -E again after the compile and stores only if both keys
// agree (nothing the compile read changed meanwhile). The first compile of a
// context only arms the marker.
//
// Where the -E runs: run_helper() on the calling arena thread, synchronously
// (bounded by a 120 s timeout), outside the pool's --jobs bound. A hit costs
// one -E, a miss two; see BENCHMARKS.md.
#include "compiler/cc_preprocessed.h"

#include <algorithm>
#include <set>

#include "compiler/cc_probe.h"
#include "compiler/planner_impl.h"

namespace ccpool::compiler {
namespace {

constexpr size_t kMaxPreprocessed = 256u << 20;
constexpr const char* kMarker = "ccpool-pp-marker v1\n";

}  // namespace

std::set<std::string> marker_files(const std::string& text) {
  std::set<std::string> files;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    if (end - pos > 4 && text[pos] == '#' && text[pos + 1] == ' ' && text[pos + 2] >= '0' &&
        text[pos + 2] <= '9') {
      size_t q = text.find('"', pos);
      if (q != std::string::npos && q < end) {
        std::string name;
        size_t i = q + 1;
        for (; i < end && text[i] != '"'; ++i) {
          if (text[i] == '\\' && i + 1 < end) {
            char c = text[++i];
            if (c >= '0' && c <= '7') {
              int v = 0;
              for (int k = 0; k < 3 && i < end && text[i] >= '0' && text[i] <= '7'; ++k, ++i) {
                v = v * 8 + (text[i] - '0');
              }
              --i;
              name += static_cast<char>(v);
            } else {
              name += c;
            }
          } else {
            name += text[i];
          }
        }
        if (!name.empty() && name[0] != '<') files.insert(name);
      }
    }
    pos = end + 1;
  }
  return files;
}

namespace {

bool fallback_applies(const std::string& code) { return code.rfind("has_include", 0) == 0; }

}  // namespace

WhyNot unsafe_preprocessed(const HelperOutput& out, bool sde_pinned) {
  bool date_time = out.err.find("[-Wdate-time]") != std::string::npos;
  if (date_time && (!sde_pinned || out.err.find("\"__TIMESTAMP__\"") != std::string::npos)) {
    return {"date_time_macro", "__TIME__, __DATE__ or __TIMESTAMP__ expanded (-E does not determine them)"};
  }
  if (out.out.find("date-time") != std::string::npos) {
    return {"date_time_macro", "a pragma names -Wdate-time: its warning cannot be trusted"};
  }
  if (out.out.find("incbin") != std::string::npos) return {"incbin", "incbin in the -E output"};
  if (has_asm_directive(out.out, ".include")) return {"asm_include", "assembler .include in the -E output"};
  return {};
}

std::optional<Digest> Planner::Impl::pp_key(const Plan& plan, WhyNot& why) {
  const CcDetail& cc = *plan.detail->cc;
  auto no = [&](std::string code, std::string text) {
    why = {std::move(code), std::move(text)};
    return std::optional<Digest>();
  };
  if (cc.pp_argv.empty()) return no("preprocessor_ineligible", "no preprocessor mode for this command");
  // The run's environment (already without the shim) as a helper's, built
  // here: a hit of direct mode never needs it.
  std::vector<std::string> pp_env = helper_env(plan.run_env);
  std::erase_if(pp_env, [](const std::string& e) {
    return e.rfind("DEPENDENCIES_OUTPUT=", 0) == 0 || e.rfind("SUNPRO_DEPENDENCIES=", 0) == 0;
  });
  Result<HelperOutput> out = run_helper(cc.pp_argv, pp_env, cc.cwd, std::chrono::seconds(120),
                                        plan.run_program, kMaxPreprocessed);
  if (!out || out->exit_code != 0) {
    return no("preprocessor_failed", out ? "-E exited " + std::to_string(out->exit_code) : out.error().message);
  }
  if (WhyNot unsafe = unsafe_preprocessed(*out, cc.sde_pinned); !unsafe.empty()) {
    return no(std::move(unsafe.code), std::move(unsafe.text));
  }
  Hasher h;
  h.add_field("ccpool-cc-pp-v1");
  hash_digest(h, plan.flight_key);
  h.add_field(out->out);
  for (const std::string& file : marker_files(out->out)) {
    Result<HashedFile> f = hasher.hash(absolute_path(file, cc.cwd));
    if (!f) return no("input_unreadable", "'" + file + "' named by -E: " + f.error().message);
    h.add_field(file);
    hash_digest(h, f->content);
  }
  return h.digest();
}

std::optional<Digest> Planner::Impl::lookup_pp(const Plan& plan, const ManifestStorage& manifests) {
  const CcDetail& cc = *plan.detail->cc;
  if (cc.pp_argv.empty() || !manifests.load || !manifests.load(cc.pp_marker)) return std::nullopt;
  WhyNot why;
  std::optional<Digest> key = pp_key(plan, why);
  std::lock_guard<std::mutex> lock(plan.detail->pp->mutex);
  plan.detail->pp->looked_up = true;
  plan.detail->pp->before = key;
  plan.detail->pp->why = why;
  return key;
}

Finished Planner::Impl::finish_pp(const Plan& plan, std::chrono::system_clock::time_point started,
                                  Finished refused, const ManifestStorage& manifests) {
  const CcDetail& cc = *plan.detail->cc;
  if (refused.store || !fallback_applies(refused.why_not_code) || cc.pp_argv.empty()) return refused;
  if (manifests.save && !(manifests.load && manifests.load(cc.pp_marker))) manifests.save(cc.pp_marker, kMarker);
  std::optional<Digest> before;
  Finished done;
  {
    std::lock_guard<std::mutex> lock(plan.detail->pp->mutex);
    before = plan.detail->pp->before;
    if (!before && plan.detail->pp->looked_up) {
      done.why_not_code = plan.detail->pp->why.code;
      done.why_not = plan.detail->pp->why.text;
      return done;
    }
  }
  if (!before) {
    refused.why_not += "; preprocessor mode armed for the next compile";
    return refused;
  }
  WhyNot why;
  std::optional<Digest> after = pp_key(plan, why);
  if (!after) {
    done.why_not_code = why.code;
    done.why_not = why.text;
    return done;
  }
  WhyNot changed = verify_plan_inputs(*this, *plan.detail, started);
  if (*after != *before || !changed.empty()) {
    done.why_not_code = "input_changed_during_compile";
    done.why_not =
        changed.empty() ? "the -E output or an included file changed during the compile" : changed.text;
    return done;
  }
  done.store = true;
  done.mode = KeyMode::kPreprocessor;
  done.result_key = *after;
  return done;
}

void set_up_preprocessor_mode(CcDetail& cc, const CcArgs& a, const Request& request, const ToolIdentity& tool) {
  if (a.mode == CcMode::kLink) return;
  if (std::find(a.args.begin(), a.args.end(), "-w") != a.args.end()) return;
  std::vector<std::string> argv = {request.argv[0]};
  for (size_t i = 0; i < a.args.size(); ++i) {
    const std::string& arg = a.args[i];
    bool output = !a.output.empty() && (i == a.output_index || (!a.output_joined && i + 1 == a.output_index));
    bool mf = std::find(a.dep_mf_indices.begin(), a.dep_mf_indices.end(), i) != a.dep_mf_indices.end();
    if (output || mf || arg == "-c" || arg == "-S" || arg == "-MD" || arg == "-MMD" || arg == "-MP") continue;
    if (arg == "-MT" || arg == "-MQ") {
      ++i;
      continue;
    }
    if (arg.rfind("-MT", 0) == 0 || arg.rfind("-MQ", 0) == 0) continue;
    argv.push_back(arg);
  }
  argv.insert(argv.end(), {"-E", "-Wdate-time", "-Wsystem-headers", "-Wno-error"});
  cc.pp_argv = std::move(argv);
  Hasher h;
  h.add_field("ccpool-pp-marker-v1");
  hash_digest(h, tool.key);
  h.add_u64(static_cast<uint64_t>(cc.family));
  h.add_field(a.language);
  for (const auto* list : {&cc.dirs.quote, &cc.dirs.bracket}) {
    h.add_u64(list->size());
    for (const std::string& d : *list) h.add_field(d);
  }
  cc.pp_marker = h.digest();
}

}  // namespace ccpool::compiler
