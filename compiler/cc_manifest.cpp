// Direct mode after plan(): lookup() validates manifest entries, finish()
// records one from the run's dependency file. The negative-path rule (header
// shadowing, ccache #504) is documented in docs/cache-keys.md.
#include <sys/stat.h>

#include <map>
#include <set>

#include "base/fs.h"
#include "compiler/depfile.h"
#include "compiler/manifest.h"
#include "compiler/planner_impl.h"

namespace ccpool::compiler {
namespace {

bool has_prefix_dir(const std::string& path, const std::string& dir) {
  if (dir.empty()) return false;
  if (dir == "/") return path.size() > 1 && path[0] == '/';
  return path.size() > dir.size() + 1 && path.compare(0, dir.size(), dir) == 0 &&
         path[dir.size()] == '/';
}

std::string join_dir(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

std::string dir_of(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return "";
  return slash == 0 ? "/" : path.substr(0, slash);
}

bool is_regular_file(const std::string& path) {
  std::optional<FileStat> st = stat_path(path);
  return st && S_ISREG(st->mode);
}

int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Digest result_key(const Digest& direct, const ManifestEntry& e) {
  Hasher h;
  h.add_field("ccpool-cc-result-v1");
  hash_digest(h, direct);
  h.add_u64(e.files.size());
  for (const auto& [path, digest] : e.files) {
    h.add_field(path);
    hash_digest(h, digest);
  }
  h.add_u64(e.negatives.size());
  for (const std::string& n : e.negatives) h.add_field(n);
  h.add_u64(static_cast<uint64_t>(e.date_bucket + 1));
  return h.digest();
}

// Every earlier search directory in which the compiler would have looked
// for `dep` before finding it where it did. `dep` may be reachable as
// <dir>/<name> for several search directories; each reading contributes
// (over-approximation only costs misses). Returns the names under which
// `dep` was reachable. Quote includes also look in the includer's
// directory first; the caller adds those candidates.
std::vector<std::string> add_search_negatives(const std::string& dep, const std::vector<std::string>& chain,
                                              std::set<std::string>& out) {
  std::vector<std::string> names;
  for (size_t i = 0; i < chain.size(); ++i) {
    if (!has_prefix_dir(dep, chain[i])) continue;
    std::string name = dep.substr(chain[i].size() + (chain[i] == "/" ? 0 : 1));
    for (size_t j = 0; j < i; ++j) out.insert(join_dir(chain[j], name));
    names.push_back(std::move(name));
  }
  return names;
}

std::vector<NegativeGroup> group_by_dir(const std::vector<std::string>& negatives) {
  std::map<std::string, std::vector<std::string>> by_dir;
  for (const std::string& n : negatives) {
    size_t slash = n.rfind('/');
    if (slash == std::string::npos) {
      by_dir[""].push_back(n);
    } else {
      by_dir[slash == 0 ? "/" : n.substr(0, slash)].push_back(n.substr(slash + 1));
    }
  }
  std::vector<NegativeGroup> groups;
  groups.reserve(by_dir.size());
  for (auto& [dir, names] : by_dir) groups.push_back({dir, std::move(names)});
  return groups;
}

}  // namespace

std::shared_ptr<const ParsedManifest> Planner::Impl::parsed_manifest(const Digest& direct,
                                                                     const std::string& blob) {
  Hasher h;
  h.add_field("ccpool-parsed-manifest-v1");
  hash_digest(h, direct);
  h.update(blob);
  Digest key = h.digest();
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = parsed_manifests.find(key);
    if (it != parsed_manifests.end()) return it->second;
  }
  manifest_parses.fetch_add(1);
  std::optional<Manifest> manifest = parse_manifest(blob);
  if (!manifest) return nullptr;
  auto parsed = std::make_shared<ParsedManifest>();
  for (ManifestEntry& e : manifest->entries) {
    ParsedEntry pe;
    pe.key_ok = result_key(direct, e) == e.result_key;
    pe.groups = group_by_dir(e.negatives);
    e.negatives.clear();
    pe.entry = std::move(e);
    parsed->entries.push_back(std::move(pe));
  }
  std::lock_guard<std::mutex> lock(mutex);
  if (parsed_manifests.size() >= kMaxParsedManifests) parsed_manifests.clear();
  parsed_manifests.emplace(key, parsed);
  return parsed;
}

Result<std::optional<Digest>> Planner::Impl::lookup_cc(const Plan& plan,
                                                       const ManifestStorage& manifests) {
  if (!plan.detail || !plan.detail->cc) return make_error(ErrorCode::kInternal, "direct plan without detail");
  const CcDetail& cc = *plan.detail->cc;
  std::optional<std::string> blob = manifests.load ? manifests.load(plan.flight_key) : std::nullopt;
  if (!blob) return std::optional<Digest>();
  std::shared_ptr<const ParsedManifest> manifest = parsed_manifest(plan.flight_key, *blob);
  if (!manifest) return std::optional<Digest>();
  int64_t bucket = date_bucket(now_seconds());
  for (const ParsedEntry& pe : manifest->entries) {
    const ManifestEntry& e = pe.entry;
    if (!pe.key_ok) continue;
    if (e.date_bucket >= 0 && e.date_bucket != bucket) continue;
    bool valid = true;
    for (const auto& [path, digest] : e.files) {
      Result<HashedFile> f = hasher.hash(absolute_path(path, cc.cwd));
      if (!f || f->content != digest) {
        valid = false;
        break;
      }
    }
    // Negative paths, one parent directory at a time (compiler/dir_listing.h).
    for (size_t i = 0; valid && i < pe.groups.size(); ++i) {
      const NegativeGroup& g = pe.groups[i];
      std::string dir = g.dir.empty() ? (cc.cwd.empty() ? "." : cc.cwd) : absolute_path(g.dir, cc.cwd);
      if (!listings.none_regular(dir, g.names)) valid = false;
    }
    if (valid) return std::optional<Digest>(e.result_key);
  }
  return std::optional<Digest>();
}

Result<Finished> Planner::Impl::finish_cc(const Plan& plan, std::chrono::system_clock::time_point started,
                                          const ManifestStorage& manifests) {
  Finished done;
  const CcDetail& cc = *plan.detail->cc;
  auto refuse = [&](std::string code, std::string why) {
    done.why_not_code = std::move(code);
    done.why_not = std::move(why);
    return done;
  };
  WhyNot verified = verify_plan_inputs(*this, *plan.detail, started);
  if (!verified.empty()) return refuse(std::move(verified.code), std::move(verified.text));
  Result<std::string> text = read_file(cc.dep_path);
  if (!text) return refuse("depfile_missing", "no dependency file: " + text.error().message);
  std::optional<std::vector<std::string>> deps = parse_depfile(*text);
  if (!deps || deps->empty() || (*deps)[0] != cc.source) {
    return refuse("depfile_not_understood", "dependency file not understood");
  }
  if (deps->size() > kMaxManifestFiles) return refuse("too_many_inputs", "more than 10000 inputs");
  if (cc.dep_view && !derive_depfile(*text, *cc.dep_view)) {
    return refuse("depfile_not_derivable", "the -MMD/DEPENDENCIES_OUTPUT file cannot be derived exactly");
  }

  int64_t start_ns = to_ns(started);
  ManifestEntry entry;
  std::set<std::string> includer_dirs;
  std::set<std::string> quote_spellings;
  bool opaque = false;  // some include could not be read: every header may be a quote include
  bool date = false;
  for (const std::string& dep : *deps) {
    std::string abs = absolute_path(dep, cc.cwd);
    Result<HashedFile> f = hasher.hash(abs);
    if (!f) return refuse("input_unreadable", "input vanished: " + f.error().message);
    if (f->stat.mtime_ns >= start_ns || f->stat.ctime_ns >= start_ns) {
      return refuse("input_changed_during_compile", "'" + abs + "' was modified during the compile");
    }
    Result<ScanInfo> scanned = scan(abs, f->content);
    if (!scanned) return refuse("input_changed_during_compile", scanned.error().message);
    const ScanInfo& info = *scanned;
    uint8_t flags = info.flags;
    if (!info.includes || info.includes->opaque) {
      opaque = true;
    } else {
      quote_spellings.insert(info.includes->quote.begin(), info.includes->quote.end());
    }
    if (flags & kScanTimestamp) return refuse("timestamp_macro", "__TIMESTAMP__ in '" + dep + "'");
    if ((flags & kScanTime) && !cc.sde_pinned) {
      return refuse("time_macro", "__TIME__ without SOURCE_DATE_EPOCH in '" + dep + "'");
    }
    if ((flags & kScanDate) && !cc.sde_pinned) date = true;
    if (flags & kScanIncbin) return refuse("incbin", ".incbin in '" + dep + "'");
    if (flags & kScanHasInclude) {
      bool system = false;
      for (const std::string& d : cc.dirs.system) system |= has_prefix_dir(dep, d);
      if (!system) {
        return refuse("has_include", "__has_include in '" + dep + "' (its probes are not in the .d)");
      }
    }
    entry.files.emplace_back(dep, f->content);
    includer_dirs.insert(dir_of(dep));
  }
  std::vector<std::string> chain = cc.dirs.quote;
  chain.insert(chain.end(), cc.dirs.bracket.begin(), cc.dirs.bracket.end());
  // -include/-imacros act as quote includes searched from the cwd first.
  for (const std::string& forced : cc.forced_includes) {
    includer_dirs.insert("");
    quote_spellings.insert(forced);
  }
  std::set<std::string> negatives;
  for (size_t i = 1; i < deps->size(); ++i) {
    std::vector<std::string> names = add_search_negatives((*deps)[i], chain, negatives);
    if (!opaque) continue;
    // Conservative rule: any header may have been a quote include of any file.
    for (const std::string& name : names) {
      for (const std::string& d : includer_dirs) negatives.insert(join_dir(d, name));
    }
  }
  // Only `#include "q"` looks in the includer's directory, and any file of
  // this compile may have been the includer.
  for (const std::string& q : quote_spellings) {
    if (q.empty() || q[0] == '/') continue;  // absolute: no directory is searched
    for (const std::string& d : includer_dirs) negatives.insert(join_dir(d, q));
  }
  std::set<std::string> positives(deps->begin(), deps->end());
  for (const std::string& n : negatives) {
    if (positives.count(n)) continue;
    std::optional<FileStat> st = stat_path(absolute_path(n, cc.cwd));
    if (st && S_ISREG(st->mode)) {
      // It existed, yet the compiler took a later candidate: this reading of
      // the include is not the one that happened (or #include_next skipped
      // it). Unless it appeared during the compile, it proves nothing.
      if (st->mtime_ns >= start_ns || st->ctime_ns >= start_ns) {
        return refuse("input_changed_during_compile", "'" + n + "' appeared during the compile");
      }
      continue;
    }
    entry.negatives.push_back(n);
    if (entry.negatives.size() > kMaxManifestNegatives) {
      return refuse("too_many_negatives", "too many negative paths");
    }
  }
  if (date) {
    int64_t start_s = start_ns / 1000000000;
    int64_t bucket = date_bucket(start_s);
    if (date_bucket(now_seconds()) != bucket) {
      return refuse("date_bucket_crossed", "__DATE__ and the compile crossed a date bucket");
    }
    entry.date_bucket = bucket;
  }
  entry.result_key = result_key(plan.flight_key, entry);

  Manifest manifest;
  if (manifests.load) {
    if (std::optional<std::string> blob = manifests.load(plan.flight_key)) {
      if (std::optional<Manifest> old = parse_manifest(*blob)) manifest = std::move(*old);
    }
  }
  std::vector<ManifestEntry> kept = {entry};
  for (ManifestEntry& e : manifest.entries) {
    if (kept.size() >= kMaxManifestEntries) break;
    if (e.result_key != entry.result_key) kept.push_back(std::move(e));
  }
  manifest.entries = std::move(kept);
  if (manifests.save) manifests.save(plan.flight_key, serialize_manifest(manifest));
  done.store = true;
  done.result_key = entry.result_key;
  return done;
}

}  // namespace ccpool::compiler
