// Direct mode after plan(): lookup() validates manifest entries, finish()
// records one from the run's dependency file. The negative-path rule (header
// shadowing, ccache #504) is documented in docs/cache-keys.md.
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <set>

#include "base/fs.h"
#include "compiler/cc_lookups.h"
#include "compiler/depfile.h"
#include "compiler/manifest.h"
#include "compiler/planner_impl.h"

namespace ccpool::compiler {
namespace {

int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Digest result_key(const Digest& direct, const ManifestEntry& e) {
  Hasher h;
  h.add_field("ccpool-cc-result-v2");
  hash_digest(h, direct);
  h.add_u64(e.files.size());
  for (const auto& [path, digest] : e.files) {
    h.add_field(path);
    hash_digest(h, digest);
  }
  h.add_u64(e.negatives.size());
  for (const std::string& n : e.negatives) h.add_field(n);
  h.add_u64(e.absent.size());
  for (const std::string& a : e.absent) h.add_field(a);
  h.add_u64(e.dirs.size());
  for (const auto& [path, digest] : e.dirs) {
    h.add_field(path);
    hash_digest(h, digest);
  }
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

std::vector<NegativeGroup> group_by_dir(const std::vector<std::string>& negatives,
                                        const std::vector<std::string>& absent) {
  std::map<std::string, NegativeGroup> by_dir;
  auto add = [&](const std::string& n, bool must_be_absent) {
    size_t slash = n.rfind('/');
    std::string dir = slash == std::string::npos ? "" : slash == 0 ? "/" : n.substr(0, slash);
    std::string name = slash == std::string::npos ? n : n.substr(slash + 1);
    NegativeGroup& g = by_dir[dir];
    (must_be_absent ? g.absent : g.names).push_back(std::move(name));
  };
  for (const std::string& n : negatives) add(n, false);
  for (const std::string& a : absent) add(a, true);
  std::vector<NegativeGroup> groups;
  groups.reserve(by_dir.size());
  for (auto& [dir, group] : by_dir) {
    group.dir = dir;
    groups.push_back(std::move(group));
  }
  return groups;
}

}  // namespace

namespace {

Digest parsed_manifest_key(const Digest& direct, const Digest& content) {
  Hasher h;
  h.add_field("ccpool-parsed-manifest-v2");
  hash_digest(h, direct);
  hash_digest(h, content);
  return h.digest();
}

}  // namespace

std::shared_ptr<const ParsedManifest> Planner::Impl::memoized_manifest(const Digest& direct,
                                                                       const Digest& content) {
  Digest key = parsed_manifest_key(direct, content);
  std::lock_guard<std::mutex> lock(mutex);
  auto it = parsed_manifests.find(key);
  return it != parsed_manifests.end() ? it->second : nullptr;
}

std::shared_ptr<const ParsedManifest> Planner::Impl::parsed_manifest(const Digest& direct,
                                                                     const std::string& blob) {
  // Keyed by the bytes parsed (not by what content() said before they were
  // read: the manifest may have been replaced in between).
  Digest key = parsed_manifest_key(direct, hash_bytes(blob));
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
    pe.groups = group_by_dir(e.negatives, e.absent);
    e.negatives.clear();
    e.absent.clear();
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
  std::shared_ptr<const ParsedManifest> manifest;
  if (manifests.content) {
    std::optional<Digest> content = manifests.content(plan.flight_key);
    if (!content) return std::optional<Digest>();
    manifest = memoized_manifest(plan.flight_key, *content);
  }
  if (!manifest) {
    std::optional<std::string> blob = manifests.load ? manifests.load(plan.flight_key) : std::nullopt;
    if (!blob) return std::optional<Digest>();
    manifest = parsed_manifest(plan.flight_key, *blob);
  }
  if (!manifest) return std::optional<Digest>();
  int64_t bucket = date_bucket(now_seconds());
  DirListings::Scope dirs(listings);  // this lookup's directory stats, shared by its entries
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
    // Negative and absent paths, one parent directory at a time
    // (compiler/dir_listing.h).
    for (size_t i = 0; valid && i < pe.groups.size(); ++i) {
      const NegativeGroup& g = pe.groups[i];
      std::string dir = g.dir.empty() ? (cc.cwd.empty() ? "." : cc.cwd) : absolute_path(g.dir, cc.cwd);
      if (!dirs.check(dir, g.names, g.absent)) valid = false;
    }
    // NAME.gch/ directories: the same names (their files are in e.files).
    for (size_t i = 0; valid && i < e.dirs.size(); ++i) {
      std::optional<Digest> names = listings.names_digest(absolute_path(e.dirs[i].first, cc.cwd));
      if (!names || *names != e.dirs[i].second) valid = false;
    }
    if (valid) return std::optional<Digest>(e.result_key);
  }
  return std::optional<Digest>();
}

namespace {

// Precompiled headers gcc or clang could have taken instead of a header: the
// .d file lists neither the PCH nor the header then (docs/cache-keys.md).
// gcc tries NAME.gch (a file, or every file of a NAME.gch/ directory) in each
// directory it searches, before NAME, but only for the first include of the
// main file (or an -include); clang only for -include, as NAME.pch or
// NAME.gch beside the path given. Over-approximated: every -include and
// every spelling of the main file is walked.
std::string record_pch_candidates(LookupRecorder& lookups, const CcDetail& cc, const IncludeScan* main_scan,
                                  const std::vector<std::string>& deps, const std::set<std::string>& negatives) {
  std::vector<std::string> chain = cc.dirs.quote;
  chain.insert(chain.end(), cc.dirs.bracket.begin(), cc.dirs.bracket.end());
  std::vector<std::string> from_cwd = {""};  // -include: the cwd, then the quote chain
  from_cwd.insert(from_cwd.end(), chain.begin(), chain.end());
  for (const std::string& forced : cc.forced_includes) {
    if (std::string why = lookups.pch_search(from_cwd, forced, {".gch", ".pch"}); !why.empty()) return why;
  }
  if (cc.family != Family::kGcc) return "";
  for (const std::string& dep : deps) {
    // The implicit pre-include is looked up like a first include too.
    if (base_name(dep) != "stdc-predef.h") continue;
    if (std::string why = lookups.pch_search(cc.dirs.bracket, "stdc-predef.h", {".gch"}); !why.empty()) return why;
  }
  if (main_scan && !main_scan->opaque) {
    std::vector<std::string> quote_dirs = {dir_of(cc.source)};
    quote_dirs.insert(quote_dirs.end(), chain.begin(), chain.end());
    for (const std::string& q : main_scan->quote) {
      if (std::string why = lookups.pch_search(quote_dirs, q, {".gch"}); !why.empty()) return why;
    }
    for (const std::string& a : main_scan->angle) {
      if (std::string why = lookups.pch_search(cc.dirs.bracket, a, {".gch"}); !why.empty()) return why;
    }
    return "";
  }
  // The main file's includes are unreadable: any header found, and any
  // candidate before it, may have been its first include. One taken from a
  // PCH is missing from the .d altogether: refuse when a .gch sits where a
  // first include is searched (a subdirectory named by the macro is the
  // documented gap).
  std::vector<std::string> first_dirs = {dir_of(cc.source), ""};
  first_dirs.insert(first_dirs.end(), chain.begin(), chain.end());
  if (std::string why = lookups.no_pch_in(first_dirs); !why.empty()) return why;
  for (const std::string& dep : deps) {
    if (dep == cc.dep_source) continue;
    if (std::string why = lookups.pch_candidate(dep + ".gch"); !why.empty()) return why;
  }
  for (const std::string& n : negatives) {
    if (std::string why = lookups.pch_candidate(n + ".gch"); !why.empty()) return why;
  }
  return "";
}

bool under_system_dir(const std::string& path, const CcDetail& cc) {
  for (const std::string& d : cc.dirs.system) {
    if (has_prefix_dir(path, d)) return true;
  }
  return false;
}

}  // namespace

Result<Finished> Planner::Impl::finish_cc(const Plan& plan, std::chrono::system_clock::time_point started,
                                          const ManifestStorage& manifests) {
  Finished done;
  const CcDetail& cc = *plan.detail->cc;
  auto refuse = [&](std::string code, std::string why) {
    done.why_not_code = std::move(code);
    done.why_not = std::move(why);
    return done;
  };
  // cc_lookups answers "code: detail".
  auto refuse_coded = [&](const std::string& why) {
    size_t colon = why.find(':');
    std::string code = why.substr(0, colon);
    if (colon == std::string::npos || code.find(' ') != std::string::npos) code = "unspecified";
    return refuse(std::move(code), why.substr(colon == std::string::npos ? 0 : colon + 2));
  };
  WhyNot verified = verify_plan_inputs(*this, *plan.detail, started);
  if (!verified.empty()) return refuse(std::move(verified.code), std::move(verified.text));
  Result<std::string> text = read_file(cc.dep_path);
  if (!text) return refuse("depfile_missing", "no dependency file: " + text.error().message);
  std::optional<std::vector<std::string>> deps = parse_depfile(*text);
  // clang lists a PCH's own inputs before the source.
  if (!deps || std::find(deps->begin(), deps->end(), cc.dep_source) == deps->end()) {
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
  LookupRecorder lookups(hasher, listings, cc.cwd, start_ns);
  SearchOrder order{cc.dirs.quote, cc.dirs.bracket};
  std::shared_ptr<const IncludeScan> main_scan;
  std::string pasted;  // a file that may paste a time macro; refused after the loop (a has_include
                       // refusal first lets preprocessor mode, which sees through pastes, take it)
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
    if (dep == cc.dep_source) main_scan = info.includes;
    if (flags & kScanTimestamp) return refuse("timestamp_macro", "__TIMESTAMP__ in '" + dep + "'");
    if ((flags & kScanTime) && !cc.sde_pinned) return refuse("time_macro", "__TIME__ without SOURCE_DATE_EPOCH in '" + dep + "'");
    if ((flags & kScanDate) && !cc.sde_pinned) date = true;
    if (flags & kScanIncbin) return refuse("incbin", ".incbin in '" + dep + "'");
    if (flags & kScanAsmInclude) return refuse("asm_include", "assembler .include in '" + dep + "'");
    if ((flags & kScanPastePiece) && pasted.empty() && !under_system_dir(dep, cc)) pasted = dep;
    // __has_include answers are not in the .d: resolve each literal probe
    // the way the compiler did. Headers in the compiler's default system
    // directories are trusted (managed by the package manager).
    bool probes = (flags & kScanHasInclude) || !info.includes || info.includes->probe_nonliteral;
    if (probes && !under_system_dir(dep, cc)) {
      if (!info.includes || info.includes->probe_nonliteral) {
        return refuse(std::string(kReasonHasIncludeNonliteral), "'" + dep +
                      "' probes a header named by a macro (__has_include argument not a literal)");
      }
      for (const HasIncludeProbe& probe : info.includes->probes) {
        if (std::string why = lookups.probe(dep, probe, order); !why.empty()) return refuse_coded(why);
      }
    }
    entry.files.emplace_back(dep, f->content);
    lookups.know_regular(dep);
    includer_dirs.insert(dir_of(dep));
  }
  if (!pasted.empty()) {
    return refuse("pasted_macro", "'" + pasted + "' may paste __TIME__/__DATE__/__TIMESTAMP__ together");
  }
  std::vector<std::string> chain = cc.dirs.quote;
  chain.insert(chain.end(), cc.dirs.bracket.begin(), cc.dirs.bracket.end());
  // -include/-imacros act as quote includes searched from the cwd first.
  for (const std::string& forced : cc.forced_includes) {
    includer_dirs.insert("");
    quote_spellings.insert(forced);
  }
  std::set<std::string> negatives;
  for (const std::string& dep : *deps) {
    if (dep == cc.dep_source) continue;
    std::vector<std::string> names = add_search_negatives(dep, chain, negatives);
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
  if (std::string why = record_pch_candidates(lookups, cc, main_scan.get(), *deps, negatives); !why.empty()) {
    return refuse_coded(why);
  }
  LookupRecord& found = lookups.record();
  negatives.insert(found.not_regular.begin(), found.not_regular.end());
  std::set<std::string> positives(deps->begin(), deps->end());
  for (const auto& [path, digest] : found.files) {
    if (positives.insert(path).second) entry.files.emplace_back(path, digest);
  }
  if (entry.files.size() > kMaxManifestFiles) return refuse("too_many_inputs", "more than 10000 inputs");
  // Most negative paths sit in directories that do not exist or do not hold
  // that name (a system header's name under every earlier -I directory): one
  // listing per directory, memoized by its stat, answers them without a
  // stat(2) each. A name the listing holds is stat'ed as before.
  DirListings::Scope scope(listings);
  std::map<std::string, DirListings::Listing> parents;
  for (const std::string& n : negatives) {
    if (positives.count(n)) continue;
    std::string abs = absolute_path(n, cc.cwd);
    size_t slash = abs.rfind('/');
    std::string parent = slash == 0 ? "/" : abs.substr(0, slash);
    auto it = parents.find(parent);
    if (it == parents.end()) it = parents.emplace(parent, scope.list(parent)).first;
    const DirListings::Listing& listing = it->second;
    bool may_exist = listing.is_dir && (!listing.names || listing.names->count(abs.substr(slash + 1)) != 0);
    std::optional<FileStat> st = may_exist ? stat_path(abs) : std::nullopt;
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
  entry.absent.assign(found.absent.begin(), found.absent.end());
  if (entry.absent.size() > kMaxManifestNegatives - entry.negatives.size()) return refuse("too_many_negatives", "too many negative paths");
  entry.dirs.assign(found.dirs.begin(), found.dirs.end());
  if (entry.dirs.size() > kMaxManifestDirs) return refuse(std::string(kReasonPchUnsupported), "too many PCH directories");
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
