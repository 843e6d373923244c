// nvcc's preprocessor key, its manifest, lookup() and finish() (the plan is
// nvcc_model.cpp; docs/cache-keys.md, "nvcc").
//
// Preprocessor key = H(flight key, each `gcc -E` step's output, each file its
// line markers name, by content). Manifest (stored under that key): every
// file the run's gcc steps read (SUNPRO_DEPENDENCIES) by content, and the
// paths that must not become regular files (a header appearing there would
// shadow one of them). Result key = H(preprocessor key, manifest bytes).
#include <sys/stat.h>

#include <set>

#include "base/fs.h"
#include "compiler/depfile.h"
#include "compiler/planner_impl.h"
#include "compiler/preprocessed_output.h"

namespace ccpool::compiler {
namespace {

constexpr size_t kMaxPreprocessed = 256u << 20;
constexpr size_t kMaxNegatives = 100000;
constexpr std::string_view kManifestHeader = "ccpool-nvcc-manifest v1\n";

// True when realpath(path) lies under one of `dirs` (realpaths).
bool under_any(const std::string& path, const std::vector<std::string>& dirs) {
  std::optional<std::string> real = real_path(path);
  if (!real) return false;
  for (const std::string& dir : dirs) {
    if (real->size() > dir.size() && real->compare(0, dir.size(), dir) == 0 &&
        (*real)[dir.size()] == '/')
      return true;
  }
  return false;
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
    Result<HelperOutput> out =
        run_helper(nv.pp_steps[i], nv.pp_env, nv.cwd, std::chrono::seconds(120), nv.pp_programs[i],
                   kMaxPreprocessed);
    if (!out || out->exit_code != 0) {
      return no("preprocessor_failed",
                out ? "-E exited " + std::to_string(out->exit_code) : out.error().message);
    }
    if (WhyNot unsafe = unsafe_preprocessed(*out, nv.sde_pinned); !unsafe.empty()) {
      return no(std::move(unsafe.code), std::move(unsafe.text));
    }
    // nvcc's front ends would expand what -E left (defense in depth: the
    // options that make -E leave macros are refused).
    for (const char* name : {"__TIME__", "__DATE__", "__TIMESTAMP__"}) {
      if (out->out.find(name) != std::string::npos)
        return no("date_time_macro", std::string(name) + " in the -E output");
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

std::optional<Digest> Planner::Impl::lookup_nvcc(const Plan& plan,
                                                 const ManifestStorage& manifests) {
  PpResult pp = nvcc_pp_key(*this, plan);
  {
    MutexLock lock(&plan.detail->pp->mutex);
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
    MutexLock lock(&plan.detail->pp->mutex);
    if (!plan.detail->pp->looked_up) return no("nvcc_not_looked_up", "finish() without lookup()");
    if (!plan.detail->pp->before) return no(plan.detail->pp->why.code, plan.detail->pp->why.text);
    before = plan.detail->pp->before;
  }
  PpResult after = nvcc_pp_key(*this, plan);
  if (!after.key) return no(after.why.code, after.why.text);
  if (*after.key != *before) {
    return no("input_changed_during_compile",
              "the -E output or an included file changed during the compile");
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
    if (base.rfind("tmpxft_", 0) == 0 && squeeze_slashes(dir_name(path)) == nv.temp_dir &&
        !stat_path(path))
      continue;
    files.insert(path);
  }
  std::string blob(kManifestHeader);
  std::set<std::string> dirs(nv.search_dirs.begin(), nv.search_dirs.end());
  for (const std::string& path : files) {
    if (path.find('\n') != std::string::npos)
      return no("input_unreadable", "a file name holds a newline");
    Result<HashedFile> f = hasher.hash(path);
    if (!f) return no("input_unreadable", "'" + path + "': " + f.error().message);
    if (f->stat.mtime_ns >= start_ns || f->stat.ctime_ns >= start_ns) {
      return no("input_changed_during_compile", "'" + path + "' was modified during the run");
    }
    // The final host compile expands macros of these files in nvcc's stub,
    // where no -Wdate-time run looked: refuse what could expand to a date.
    Result<ScanInfo> s = scan(path, f->content);
    if (!s) return no("input_unreadable", s.error().message);
    if (s->flags & (kScanDate | kScanTime | kScanTimestamp))
      return no("time_macro", "'" + path + "' names a date/time macro");
    if (s->flags & kScanIncbin) return no("incbin", "'" + path + "' holds .incbin");
    if (s->flags & kScanAsmInclude)
      return no("asm_include", "'" + path + "' holds the assembler's .include");
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
        if (st && S_ISREG(st->mode))
          continue;  // there all along and not taken: not this spelling's reading
        negatives.insert(candidate);
      }
    }
    if (negatives.size() > kMaxNegatives)
      return no("too_many_negatives", "more than 100000 negative paths");
  }
  for (const std::string& n : negatives) blob += "N\t" + n + "\n";
  if (manifests.save) manifests.save(*after.key, blob);
  done.store = true;
  done.mode = KeyMode::kPreprocessor;
  done.result_key = nvcc_result_key(*after.key, blob);
  return done;
}

}  // namespace ccpool::compiler
