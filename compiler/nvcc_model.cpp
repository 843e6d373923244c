// nvcc -c of one .cu source as one cached job: a preprocessor-mode key.
//
// nvcc's inner steps (cudafe++, cicc, ptxas, fatbinary, the host compile) use
// random tmpxft_* names that reach its objects, so two direct runs differ and
// no step's own key can make the whole command hit. Instead:
// - plan(): `nvcc --dryrun` with the same arguments lists every command nvcc
//   would run. The flight key holds nvcc's identity and that of every program
//   the dryrun names (resolved through the PATH it prints), nvcc.profile, the
//   libdevice files, the arguments, the cwd (cudafe++ and cicc get the
//   source's absolute path), the environment allowlist and the source.
// - lookup(): runs the dryrun's own `gcc -E` steps (the host one and one per
//   GPU architecture, with -Wdate-time) and keys their output and the content
//   of every file their line markers name: what cudafe++, cicc and ptxas
//   read is exactly that output. The final host compile also includes files
//   the -E steps never read (crt/host_runtime.h, fatbinary_section.h and
//   what they include, from nvcc's stub in the temp dir); the run lists them
//   (SUNPRO_DEPENDENCIES: every gcc step appends its full dependency list),
//   and a manifest under the preprocessor key records each with its content,
//   plus the paths that must not become regular files (the same spelling in
//   every search and includer directory: a new header there would shadow).
//   Result key = H(preprocessor key, manifest).
// - finish(): reruns the -E steps and stores only if the key did not change
//   during the run and no input was modified.
// See docs/cache-keys.md, "nvcc".
#include <dirent.h>
#include <sys/stat.h>

#include <climits>
#include <cstdlib>

#include <algorithm>
#include <set>

#include "base/fs.h"
#include "base/process.h"
#include "compiler/cc_preprocessed.h"
#include "compiler/cc_probe.h"
#include "compiler/depfile.h"
#include "compiler/nvcc_args.h"
#include "compiler/planner_impl.h"
#include "compiler/probe_output.h"

namespace ccpool::compiler {
namespace {

constexpr size_t kMaxPreprocessed = 256u << 20;
constexpr size_t kMaxNegatives = 100000;
constexpr std::string_view kManifestHeader = "ccpool-nvcc-manifest v1\n";

// Environment nvcc or its host compiler read (besides the C/C++ list).
const std::vector<std::string> kNvccEnv = {
    "CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "LIBRARY_PATH", "COMPILER_PATH", "GCC_EXEC_PREFIX",
    "GCC_COMPARE_DEBUG", "SOURCE_DATE_EPOCH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ",
    "COLUMNS", "GCC_COLORS", "GCC_URLS", "TERM_URLS", "PATH", "LD_LIBRARY_PATH", "TMPDIR", "NVCC_CCBIN",
    "NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS"};

std::string dir_name(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Collapses runs of '/' and drops a trailing one (nvcc forms "$TMPDIR/name"
// whatever TMPDIR ends with).
std::string squeeze_slashes(const std::string& path) {
  std::string out;
  for (char c : path) {
    if (c == '/' && !out.empty() && out.back() == '/') continue;
    out += c;
  }
  if (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

std::optional<std::string> real_path(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) return std::nullopt;
  return std::string(buf);
}

// True when realpath(path) lies under one of `dirs` (realpaths).
bool under_any(const std::string& path, const std::vector<std::string>& dirs) {
  std::optional<std::string> real = real_path(path);
  if (!real) return false;
  for (const std::string& dir : dirs) {
    if (real->size() > dir.size() && real->compare(0, dir.size(), dir) == 0 && (*real)[dir.size()] == '/') return true;
  }
  return false;
}

bool has_arg(const std::vector<std::string>& words, std::string_view arg) {
  return std::find(words.begin(), words.end(), arg) != words.end();
}

// Every prerequisite of every rule in a file several gcc runs appended to.
std::optional<std::vector<std::string>> all_prerequisites(const std::string& text) {
  std::vector<std::string> files;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = start;
    while (true) {  // a rule ends at a newline not preceded by a backslash
      end = text.find('\n', end);
      if (end == std::string::npos) {
        end = text.size();
        break;
      }
      if (end == 0 || text[end - 1] != '\\') break;
      ++end;
    }
    std::string_view rule = std::string_view(text).substr(start, end - start);
    if (rule.find_first_not_of(" \t\r") != std::string_view::npos) {
      std::optional<std::vector<std::string>> deps = parse_depfile(rule);
      if (!deps) return std::nullopt;
      files.insert(files.end(), deps->begin(), deps->end());
    }
    start = end + 1;
  }
  return files;
}

struct NvccManifest {
  std::vector<std::pair<std::string, Digest>> files;
  std::vector<std::string> not_regular;
};

std::optional<NvccManifest> parse_nvcc_manifest(std::string_view blob) {
  if (blob.substr(0, kManifestHeader.size()) != kManifestHeader) return std::nullopt;
  NvccManifest m;
  size_t pos = kManifestHeader.size();
  while (pos < blob.size()) {
    size_t end = blob.find('\n', pos);
    if (end == std::string_view::npos) return std::nullopt;
    std::string_view line = blob.substr(pos, end - pos);
    pos = end + 1;
    if (line.substr(0, 2) == "N\t") {
      m.not_regular.emplace_back(line.substr(2));
    } else if (line.substr(0, 2) == "F\t" && line.size() > 35 && line[34] == '\t') {
      std::optional<Digest> d = Digest::from_hex(line.substr(2, 32));
      if (!d) return std::nullopt;
      m.files.emplace_back(std::string(line.substr(35)), *d);
    } else {
      return std::nullopt;
    }
  }
  return m;
}

// Files nvcc's tools read besides the source and headers: nvcc.profile
// beside nvcc and every file of libdevice (NVVMIR_LIBRARY_DIR), sorted.
std::vector<std::string> nvcc_data_files(const ToolIdentity& nvcc, const std::map<std::string, std::string>& vars) {
  std::vector<std::string> files = {dir_name(nvcc.real_path) + "/nvcc.profile"};
  auto it = vars.find("NVVMIR_LIBRARY_DIR");
  if (it == vars.end()) return files;
  std::vector<std::string> names;
  if (DIR* dp = ::opendir(it->second.c_str())) {
    while (dirent* e = ::readdir(dp)) {
      if (e->d_name[0] != '.') names.push_back(e->d_name);
    }
    ::closedir(dp);
  }
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) files.push_back(it->second + "/" + n);
  return files;
}

// Fills nv.search_dirs (the temp dir and the host compiler's search list for
// this command, memoized; as written and as realpaths, since gcc writes system
// headers' paths canonicalized into dependency files) and nv.trusted_dirs:
// trusted like the C/C++ model's system directories (installed by a package
// manager, not scanned for pasted date macros), the host compiler's default
// list (probed without the environment's include variables) and the CUDA
// toolkit (TOP in the dryrun). False when a probe fails.
bool find_dirs(Planner::Impl& impl, NvccDetail& nv, const ToolIdentity& host, const std::string& source,
               const std::map<std::string, std::string>& vars) {
  std::vector<std::string> probe = nv.pp_steps[0];
  std::replace(probe.begin(), probe.end(), source, std::string("/dev/null"));
  probe.push_back("-v");
  Hasher ph;
  ph.add_field("nvcc-search-v1");
  hash_digest(ph, host.key);
  for (const std::string& a : probe) ph.add_field(a);
  for (const std::string& e : nv.pp_env) ph.add_field(e);
  ph.add_field(nv.cwd);
  Result<HelperOutput> listed = impl.memo_helper(ph.digest(), probe, nv.pp_env, nv.cwd, nv.pp_programs[0]);
  std::optional<SearchList> search = listed ? parse_search_list(listed->err) : std::nullopt;
  if (!search) return false;
  nv.search_dirs.push_back(nv.temp_dir);
  for (const auto* list : {&search->missing, &search->quote, &search->bracket}) {
    for (const std::string& dir : *list) {
      nv.search_dirs.push_back(absolute_path(dir, nv.cwd));
      if (std::optional<std::string> real = real_path(nv.search_dirs.back())) nv.search_dirs.push_back(*real);
    }
  }
  std::vector<std::string> defaults_env = {"LC_ALL=C"};
  if (vars.count("PATH")) defaults_env.push_back("PATH=" + vars.at("PATH"));
  Hasher dh;
  dh.add_field("nvcc-default-dirs-v1");
  hash_digest(dh, host.key);
  for (const std::string& e : defaults_env) dh.add_field(e);
  Result<HelperOutput> defaults = impl.memo_helper(
      dh.digest(), {nv.pp_steps[0][0], "-E", "-v", "-x", "c++", "/dev/null"}, defaults_env, "/", nv.pp_programs[0]);
  std::optional<SearchList> default_dirs = defaults ? parse_search_list(defaults->err) : std::nullopt;
  if (!default_dirs) return false;
  for (const std::string& dir : default_dirs->bracket) {
    if (std::optional<std::string> real = real_path(dir)) nv.trusted_dirs.push_back(*real);
  }
  if (auto top = vars.find("TOP"); top != vars.end()) {
    if (std::optional<std::string> real = real_path(top->second)) nv.trusted_dirs.push_back(*real);
  }
  return true;
}

}  // namespace

Result<Plan> Planner::Impl::plan_nvcc(const Request& request, const ToolIdentity& tool,
                                      const std::string& work_dir) {
  NvccArgs args = parse_nvcc_args(request.argv);
  if (!args.refused.empty()) return passthrough_plan(request, args.refused_code, args.refused);
  for (const char* name : {"NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS"}) {
    std::optional<std::string> v = env_value(request.env, name);
    if (v && !v->empty()) {
      return passthrough_plan(request, reason_code("nvcc_env", name), std::string(name) + " adds unchecked options");
    }
  }
  for (const char* name : {"DEPENDENCIES_OUTPUT", "SUNPRO_DEPENDENCIES"}) {
    if (env_value(request.env, name)) return passthrough_plan(request, "depfile_env", std::string(name) + " with nvcc");
  }
  if (work_dir.find_first_of(" \t\n") != std::string::npos) {
    return passthrough_plan(request, "nvcc_work_dir", "work dir path holds a blank");
  }
  auto no = [&](std::string code, std::string why) { return passthrough_plan(request, code, "nvcc: " + why); };
  std::vector<std::string> run_env = environment_without_shim(request.env);

  std::vector<std::string> dry_argv = {request.argv[0], "--dryrun"};
  dry_argv.insert(dry_argv.end(), request.argv.begin() + 1, request.argv.end());
  Result<HelperOutput> dry = run_helper(dry_argv, run_env, request.cwd, std::chrono::seconds(30), request.program);
  if (!dry || dry->exit_code != 0) return no("nvcc_dryrun_failed", "--dryrun failed");
  Dryrun d = parse_dryrun(dry->err);
  if (!d.error.empty()) return no("nvcc_dryrun_not_understood", d.error);
  std::string dry_path = d.vars.count("PATH") ? d.vars["PATH"] : std::string(kDefaultSearchPath);

  auto detail = std::make_shared<PlanDetail>();
  detail->tools.emplace_back(tool.real_path, tool.stat);
  Hasher h;
  h.add_field("ccpool-nvcc-v1");
  hash_digest(h, tool.key);
  h.add_field(request.program);
  h.add_u64(request.argv.size());
  for (const std::string& a : request.argv) h.add_field(a);
  h.add_field(request.cwd);
  hash_env(h, request.env, kNvccEnv);
  for (const auto& [name, value] : d.vars) {
    h.add_field(name);
    h.add_field(without_temp_ids(value));
  }

  NvccDetail nv;
  nv.cwd = request.cwd;
  std::optional<ToolIdentity> host;
  for (const DryrunCommand& c : d.commands) {
    const std::string& prog = c.words[0];
    std::string path = prog.find('/') != std::string::npos ? absolute_path(prog, request.cwd)
                                                           : search_path(prog, dry_path, request.cwd);
    if (path.empty()) return no("nvcc_dryrun_not_understood", "cannot find '" + prog + "'");
    Result<ToolIdentity> id = tool_identity(path);
    if (!id) return no("tool_unknown", id.error().message);
    h.add_field(path);
    hash_digest(h, id->key);
    detail->tools.emplace_back(id->real_path, id->stat);
    // Everything nvcc decided (-arch=native's answer, the host compiler
    // version it passes cudafe++, per-arch flags), its temp ids left out.
    h.add_u64(c.words.size());
    for (const std::string& w : c.words) h.add_field(without_temp_ids(w));
    if (!has_arg(c.words, "-E")) continue;
    host = *id;
    std::vector<std::string> step;
    for (size_t i = 0; i < c.words.size(); ++i) {
      if (c.words[i] == "-o" && i + 1 < c.words.size()) {
        ++i;
        continue;
      }
      step.push_back(c.words[i]);
    }
    step.insert(step.end(), {"-Wdate-time", "-Wsystem-headers", "-Wno-error"});
    nv.pp_steps.push_back(std::move(step));
    nv.pp_programs.push_back(path);
  }
  if (nv.pp_steps.empty() || !host) return no("nvcc_dryrun_not_understood", "no preprocessing step");
  if (family(*host, run_env) != Family::kGcc) return no("nvcc_host_compiler", "the host compiler is not gcc");

  std::vector<std::string> data_files = nvcc_data_files(tool, d.vars);
  data_files.push_back(absolute_path(args.source, request.cwd));
  for (const std::string& f : data_files) {
    Result<HashedFile> file = hasher.hash(f);
    if (!file) return no("source_unreadable", file.error().message);
    h.add_field(f);
    hash_digest(h, file->content);
    detail->inputs.push_back({f, file->content});
  }

  nv.pp_env = helper_env(request.env);
  for (const char* name : {"PATH", "LD_LIBRARY_PATH"}) {
    if (!d.vars.count(name)) continue;
    std::string prefix = std::string(name) + "=";
    std::erase_if(nv.pp_env, [&](const std::string& e) { return e.rfind(prefix, 0) == 0; });
    nv.pp_env.push_back(prefix + d.vars[name]);
  }
  nv.sde_pinned = env_value(request.env, "SOURCE_DATE_EPOCH").has_value();
  std::optional<std::string> tmpdir = env_value(request.env, "TMPDIR");
  nv.temp_dir = squeeze_slashes(tmpdir && !tmpdir->empty() ? *tmpdir : "/tmp");

  if (!find_dirs(*this, nv, *host, args.source, d.vars)) return no("search_dirs_probe_failed", "host compiler -E -v");
  nv.deps_path = work_dir + "/nvcc-deps.d";

  Plan plan;
  plan.kind = PlanKind::kCompiler;
  plan.direct_mode = true;  // the result key comes from lookup()/finish()
  plan.flight_key = h.digest();
  plan.tool = "nvcc";
  plan.job_class = "nvcc";
  plan.run_program = request.program;
  plan.run_argv = request.argv;  // in place: nvcc writes the requester's own -o
  plan.run_cwd = request.cwd;
  plan.run_env = run_env;
  plan.run_env.push_back("SUNPRO_DEPENDENCIES=" + nv.deps_path);
  plan.uses_work_dir = true;
  std::string output = absolute_path(args.output, request.cwd);
  plan.outputs.push_back({"out", output, output, false});
  plan.inputs.push_back(absolute_path(args.source, request.cwd));
  detail->nvcc = std::move(nv);
  plan.detail = std::move(detail);
  return plan;
}

namespace {

struct PpResult {
  std::optional<Digest> key;
  WhyNot why;
};

PpResult nvcc_pp_key(Planner::Impl& impl, const Plan& plan) {
  const NvccDetail& nv = *plan.detail->nvcc;
  PpResult r;
  auto no = [&](std::string code, std::string text) {
    r.why = {std::move(code), std::move(text)};
    r.key.reset();
    return r;
  };
  Hasher h;
  h.add_field("ccpool-nvcc-pp-v1");
  hash_digest(h, plan.flight_key);
  for (size_t i = 0; i < nv.pp_steps.size(); ++i) {
    Result<HelperOutput> out = run_helper(nv.pp_steps[i], nv.pp_env, nv.cwd, std::chrono::seconds(120),
                                          nv.pp_programs[i], kMaxPreprocessed);
    if (!out || out->exit_code != 0) {
      return no("preprocessor_failed", out ? "-E exited " + std::to_string(out->exit_code) : out.error().message);
    }
    bool date_time = out->err.find("[-Wdate-time]") != std::string::npos;
    if (date_time && (!nv.sde_pinned || out->err.find("\"__TIMESTAMP__\"") != std::string::npos)) {
      return no("date_time_macro", "__TIME__, __DATE__ or __TIMESTAMP__ expanded (-E does not determine them)");
    }
    if (out->out.find("date-time") != std::string::npos) {
      return no("date_time_macro", "a pragma names -Wdate-time: its warning cannot be trusted");
    }
    if (out->out.find("incbin") != std::string::npos) return no("incbin", "incbin in the -E output");
    // nvcc's front ends would expand what -E left (defense in depth: the
    // options that make -E leave macros are refused).
    for (const char* name : {"__TIME__", "__DATE__", "__TIMESTAMP__"}) {
      if (out->out.find(name) != std::string::npos) return no("date_time_macro", std::string(name) + " in the -E output");
    }
    h.add_field(out->out);
    for (const std::string& file : marker_files(out->out)) {
      std::string path = absolute_path(file, nv.cwd);
      Result<HashedFile> f = impl.hasher.hash(path);
      if (!f) return no("input_unreadable", "'" + file + "' named by -E: " + f.error().message);
      h.add_field(file);
      hash_digest(h, f->content);
    }
  }
  r.key = h.digest();
  return r;
}

Digest nvcc_result_key(const Digest& pp, std::string_view manifest) {
  Hasher h;
  h.add_field("ccpool-nvcc-result-v1");
  hash_digest(h, pp);
  h.add_field(manifest);
  return h.digest();
}

}  // namespace

std::optional<Digest> Planner::Impl::lookup_nvcc(const Plan& plan, const ManifestStorage& manifests) {
  PpResult pp = nvcc_pp_key(*this, plan);
  {
    std::lock_guard<std::mutex> lock(plan.detail->pp->mutex);
    plan.detail->pp->looked_up = true;
    plan.detail->pp->before = pp.key;
    plan.detail->pp->why = pp.why;
  }
  if (!pp.key || !manifests.load) return std::nullopt;
  std::optional<std::string> blob = manifests.load(*pp.key);
  if (!blob) return std::nullopt;
  std::optional<NvccManifest> m = parse_nvcc_manifest(*blob);
  if (!m) return std::nullopt;
  for (const auto& [path, content] : m->files) {
    Result<HashedFile> now = hasher.hash(path);
    if (!now || now->content != content) return std::nullopt;
  }
  std::map<std::string, std::vector<std::string>> groups;
  for (const std::string& path : m->not_regular) {
    size_t slash = path.rfind('/');
    if (slash == std::string::npos || slash == 0) return std::nullopt;
    groups[path.substr(0, slash)].push_back(path.substr(slash + 1));
  }
  for (const auto& [dir, names] : groups) {
    if (!listings.none_regular(dir, names)) return std::nullopt;
  }
  return nvcc_result_key(*pp.key, *blob);
}

Finished Planner::Impl::finish_nvcc(const Plan& plan, std::chrono::system_clock::time_point started,
                                    const ManifestStorage& manifests) {
  const NvccDetail& nv = *plan.detail->nvcc;
  Finished done;
  auto no = [&](std::string code, std::string text) {
    done.why_not_code = std::move(code);
    done.why_not = std::move(text);
    return done;
  };
  WhyNot changed = verify_plan_inputs(*this, *plan.detail, started);
  if (!changed.empty()) return no(changed.code, changed.text);
  std::optional<Digest> before;
  {
    std::lock_guard<std::mutex> lock(plan.detail->pp->mutex);
    if (!plan.detail->pp->looked_up) return no("nvcc_not_looked_up", "finish() without lookup()");
    if (!plan.detail->pp->before) return no(plan.detail->pp->why.code, plan.detail->pp->why.text);
    before = plan.detail->pp->before;
  }
  PpResult after = nvcc_pp_key(*this, plan);
  if (!after.key) return no(after.why.code, after.why.text);
  if (*after.key != *before) {
    return no("input_changed_during_compile", "the -E output or an included file changed during the compile");
  }
  Result<std::string> deps_text = read_file(nv.deps_path);
  if (!deps_text) return no("depfile_missing", "no SUNPRO_DEPENDENCIES file from the run");
  std::optional<std::vector<std::string>> deps = all_prerequisites(*deps_text);
  if (!deps || deps->empty()) return no("depfile_not_understood", "the run's dependency file");

  int64_t start_ns = to_ns(started);
  std::set<std::string> files;
  for (const std::string& dep : *deps) {
    std::string path = absolute_path(dep, nv.cwd);
    std::string base = base_name(path);
    // nvcc's own temporaries (its stub and fatbin sources), gone after the run.
    if (base.rfind("tmpxft_", 0) == 0 && squeeze_slashes(dir_name(path)) == nv.temp_dir && !stat_path(path)) continue;
    files.insert(path);
  }
  std::string blob(kManifestHeader);
  std::set<std::string> dirs(nv.search_dirs.begin(), nv.search_dirs.end());
  for (const std::string& path : files) {
    if (path.find('\n') != std::string::npos) return no("input_unreadable", "a file name holds a newline");
    Result<HashedFile> f = hasher.hash(path);
    if (!f) return no("input_unreadable", "'" + path + "': " + f.error().message);
    if (f->stat.mtime_ns >= start_ns || f->stat.ctime_ns >= start_ns) {
      return no("input_changed_during_compile", "'" + path + "' was modified during the run");
    }
    // The final host compile expands macros of these files in nvcc's stub,
    // where no -Wdate-time run looked: refuse what could expand to a date.
    Result<ScanInfo> s = scan(path, f->content);
    if (!s) return no("input_unreadable", s.error().message);
    if (s->flags & (kScanDate | kScanTime | kScanTimestamp)) return no("time_macro", "'" + path + "' names a date/time macro");
    if (s->flags & kScanIncbin) return no("incbin", "'" + path + "' holds .incbin");
    if ((s->flags & kScanPastePiece) && !under_any(path, nv.trusted_dirs)) {
      return no("pasted_macro", "'" + path + "' may paste a date/time macro");
    }
    blob += "F\t" + f->content.hex() + "\t" + path + "\n";
    dirs.insert(dir_name(path));  // an includer directory of quote includes
  }
  // Shadowing: each file as every spelling it can have been reached by (its
  // path after a search or includer directory), in every such directory.
  std::set<std::string> negatives;
  for (const std::string& path : files) {
    std::vector<std::string> spellings;
    for (const std::string& dir : dirs) {
      std::string prefix = dir == "/" ? dir : dir + "/";
      if (path.size() > prefix.size() && path.compare(0, prefix.size(), prefix) == 0) {
        spellings.push_back(path.substr(prefix.size()));
      }
    }
    for (const std::string& spelling : spellings) {
      for (const std::string& dir : dirs) {
        std::string candidate = (dir == "/" ? "" : dir) + "/" + spelling;
        if (candidate == path || files.count(candidate)) continue;
        std::optional<FileStat> st = stat_path(candidate);
        if (st && (st->mtime_ns >= start_ns || st->ctime_ns >= start_ns)) {
          return no("input_changed_during_compile", "'" + candidate + "' changed during the run");
        }
        if (st && S_ISREG(st->mode)) continue;  // there all along and not taken: not this spelling's reading
        negatives.insert(candidate);
      }
    }
    if (negatives.size() > kMaxNegatives) return no("too_many_negatives", "more than 100000 negative paths");
  }
  for (const std::string& n : negatives) blob += "N\t" + n + "\n";
  if (manifests.save) manifests.save(*after.key, blob);
  done.store = true;
  done.mode = KeyMode::kPreprocessor;
  done.result_key = nvcc_result_key(*after.key, blob);
  return done;
}

}  // namespace ccpool::compiler
