// C/C++ after plan(): finish() turns the record of what the run looked up
// (compiler/observed.h) into a manifest entry; lookup() validates entries
// newest first in the requester's view. docs/cache-keys.md, "The record".
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <set>

#include "base/fs.h"
#include "compiler/bounded.h"
#include "compiler/key_hash.h"
#include "compiler/manifest.h"
#include "compiler/observed.h"
#include "compiler/path_names.h"
#include "compiler/plan_helpers.h"
#include "compiler/planner_impl.h"
#include "compiler/trace_record.h"

namespace ccpool::compiler {
namespace {

Digest result_key(const Digest& direct, const ManifestEntry& e) {
  Hasher h;
  h.add_field("ccpool-cc-result-v3");
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
  h.add_u64(e.checks.size());
  for (const ManifestCheck& c : e.checks) {
    h.add_field(std::string(1, c.kind));
    h.add_field(c.path);
    h.add_field(c.answer);
  }
  h.add_u64(static_cast<uint64_t>(e.date_bucket + 1));
  return h.digest();
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

// The memo's key for one negative group: its names, in order.
std::string names_key(const NegativeGroup& g) {
  Hasher h;
  h.add_u64(g.names.size());
  for (const std::string& n : g.names) h.add_field(n);
  h.add_u64(g.absent.size());
  for (const std::string& a : g.absent) h.add_field(a);
  return h.digest().hex();
}

Digest parsed_manifest_key(const Digest& direct, const Digest& content) {
  Hasher h;
  h.add_field("ccpool-parsed-manifest-v2");
  hash_digest(h, direct);
  hash_digest(h, content);
  return h.digest();
}

ParsedEntry parse_entry(const Digest& direct, ManifestEntry e) {
  ParsedEntry pe;
  pe.key_ok = result_key(direct, e) == e.result_key;
  pe.groups = group_by_dir(e.negatives, e.absent);
  for (NegativeGroup& g : pe.groups) g.memo_key = names_key(g);
  e.negatives.clear();
  e.absent.clear();
  pe.entry = std::move(e);
  return pe;
}

}  // namespace

std::shared_ptr<const ParsedManifest> Planner::Impl::memoized_manifest(const Digest& direct,
                                                                       const Digest& content) {
  Digest key = parsed_manifest_key(direct, content);
  MutexLock lock(&mutex);
  auto it = parsed_manifests.find(key);
  return it != parsed_manifests.end() ? it->second : nullptr;
}

std::shared_ptr<const ParsedManifest> Planner::Impl::parsed_manifest(const Digest& direct,
                                                                     const std::string& blob) {
  // Keyed by the bytes parsed (not by what content() said before they were
  // read: the manifest may have been replaced in between).
  Digest key = parsed_manifest_key(direct, hash_bytes(blob));
  {
    MutexLock lock(&mutex);
    auto it = parsed_manifests.find(key);
    if (it != parsed_manifests.end()) return it->second;
  }
  manifest_parses.fetch_add(1);
  std::optional<Manifest> manifest = parse_manifest(blob);
  if (!manifest) return nullptr;
  auto parsed = std::make_shared<ParsedManifest>();
  for (ManifestEntry& e : manifest->entries)
    parsed->entries.push_back(parse_entry(direct, std::move(e)));
  MutexLock lock(&mutex);
  if (parsed_manifests.size() >= kMaxParsedManifests) parsed_manifests.clear();
  parsed_manifests.emplace(key, parsed);
  return parsed;
}

Result<std::optional<Digest>> Planner::Impl::lookup_cc(const Plan& plan,
                                                       const ManifestStorage& manifests) {
  if (!plan.detail || !plan.detail->cc)
    return make_error(ErrorCode::kInternal, "direct plan without detail");
  const CcDetail& cc = *plan.detail->cc;
  std::shared_ptr<const ParsedManifest> manifest;
  if (manifests.content) {
    std::optional<Digest> content = manifests.content(plan.flight_key);
    if (!content) return std::optional<Digest>();
    manifest = memoized_manifest(plan.flight_key, *content);
  }
  if (!manifest) {
    std::optional<std::string> blob =
        manifests.load ? manifests.load(plan.flight_key) : std::nullopt;
    if (!blob) return std::optional<Digest>();
    manifest = parsed_manifest(plan.flight_key, *blob);
  }
  if (!manifest) return std::optional<Digest>();
  DirListings::Scope dirs(listings);  // this lookup's directory stats, shared by its entries
  ObservedView view{cc.cwd, plan.run_env};
  // The memo only for a requester who sees the files as the service does;
  // what the kernel reported since the last lookup is read first.
  bool own_view = cc.memo_view ? *cc.memo_view : memo && memo->in_own_view();
  ValidationMemo* kept = own_view && memo ? memo.get() : nullptr;
  // On a thread that must not wait (compiler/bounded.h): the first entry,
  // if the memo vouches for it whole and is not busy, or nothing.
  if (bounded::active()) {
    for (const ParsedEntry& pe : manifest->entries) {
      if (!pe.key_ok) continue;
      const ManifestEntry& e = pe.entry;
      std::string asked = e.result_key.hex();
      asked += '\0';
      asked += cc.cwd;
      if (kept && environment_holds(e, view) &&
          kept->unchanged_since_served_if_free(asked) == true) {
        return std::optional<Digest>(e.result_key);
      }
      break;
    }
    bounded::decline();  // the answers one by one, and learning, are a request thread's
    return std::optional<Digest>();
  }
  if (kept) kept->sync();
  std::vector<ValidationMemo::Item> learn;
  for (const ParsedEntry& pe : manifest->entries) {
    const ManifestEntry& e = pe.entry;
    if (!pe.key_ok) continue;
    std::string use = kept ? e.result_key.hex() : std::string();  // one use: this entry
    // The entry's facts in this cwd (the result key covers the direct key
    // and the whole entry, so every question it asks): when the memo served
    // all of them and has not moved since, it would serve them all again.
    std::string asked;
    if (kept) {
      asked = use;
      asked += '\0';
      asked += cc.cwd;
      if (environment_holds(e, view) && kept->unchanged_since_served(asked)) {
        kept->learn({}, listings, use);  // counts this use, as below
        return std::optional<Digest>(e.result_key);
      }
    }
    // What is validated in full is collected only when this hit will learn it.
    bool collect = kept && kept->learns_next(use);
    learn.clear();
    uint64_t generation = kept ? kept->generation() : 0;
    bool all_memo = kept != nullptr;
    if (!entry_holds(pe, view, dirs, kept, collect ? &learn : nullptr, &all_memo)) continue;
    if (kept) {
      if (all_memo) kept->note_served(asked, generation);
      kept->learn(learn, listings, use);
    }
    return std::optional<Digest>(e.result_key);
  }
  return std::optional<Digest>();
}

namespace {

ValidationMemo::Item negative_item(const std::string& dir, const NegativeGroup& g, std::string key,
                                   DirListings& listings) {
  ValidationMemo::Item item;
  item.kind = 'n';
  item.abs = dir;
  item.extra = std::move(key);
  item.names = g.names;
  item.names.insert(item.names.end(), g.absent.begin(), g.absent.end());
  item.compute = [&listings, dir, names = g.names, absent = g.absent] {
    return listings.check(dir, names, absent) ? std::string("1") : std::string("0");
  };
  return item;
}

}  // namespace

bool Planner::Impl::entry_holds(const ParsedEntry& pe, const ObservedView& view,
                                DirListings::Scope& dirs, ValidationMemo* memo,
                                std::vector<ValidationMemo::Item>* learn, bool* all_memo) {
  const ManifestEntry& e = pe.entry;
  // Environment and cwd first (no system call), then every file by content
  // (memoized by stat), absent paths one parent directory at a time
  // (compiler/dir_listing.h), then the other answers.
  if (!environment_holds(e, view)) return false;
  // One lstat per file: when it is not a link, that is its stat too, and the
  // real-path checks below reuse it.
  LinkStats link_stats;
  std::string scratch;
  for (const auto& [path, digest] : e.files) {
    const std::string& abs = absolute_in(path, view.cwd, scratch);
    if (memo) {
      if (std::optional<Digest> content = memo->content(abs)) {
        if (*content != digest) return false;
        continue;
      }
      if (learn) learn->emplace_back().abs = abs;
    }
    if (all_memo) *all_memo = false;
    const std::optional<FileStat>& st = link_stats.of(abs);
    Result<HashedFile> f = st && !S_ISLNK(st->mode) ? hasher.hash(abs, *st) : hasher.hash(abs);
    if (!f || f->content != digest) return false;
  }
  for (const NegativeGroup& g : pe.groups) {
    std::string dir =
        g.dir.empty() ? (view.cwd.empty() ? "." : view.cwd) : absolute_path(g.dir, view.cwd);
    if (memo && memo->answer_is('n', dir, g.memo_key, "1") == true) continue;
    if (all_memo) *all_memo = false;
    if (!dirs.check(dir, g.names, g.absent)) return false;
    if (learn) learn->push_back(negative_item(dir, g, g.memo_key, listings));
  }
  return checks_hold(e, view, listings, &link_stats, memo, learn, all_memo);
}

void Planner::Impl::learn_record(const std::string& cwd, const std::vector<std::string>& env,
                                 const ParsedEntry& pe) {
  ValidationMemo* kept = memo && memo->in_own_view() ? memo.get() : nullptr;
  if (!kept) return;
  kept->sync();
  DirListings::Scope dirs(listings);
  ObservedView view{cwd, env};
  std::vector<ValidationMemo::Item> learn;
  // Validated like a hit first: a file changed since the compiler read it is
  // not learned (and its entry will miss anyway).
  if (entry_holds(pe, view, dirs, kept, &learn)) kept->learn_now(learn, listings);
}

Result<Finished> Planner::Impl::finish_cc(const Plan& plan, const RunFacts& run,
                                          const ManifestStorage& manifests) {
  Finished done;
  const CcDetail& cc = *plan.detail->cc;
  auto refuse = [&](std::string code, std::string why) {
    done.why_not_code = std::move(code);
    done.why_not = std::move(why);
    return done;
  };
  WhyNot verified = verify_plan_inputs(*this, *plan.detail, run.started);
  if (!verified.empty()) return refuse(std::move(verified.code), std::move(verified.text));
  Result<std::string> text = read_file(plan.trace_path);
  if (!text) return refuse("trace_missing", "no record of the run: " + text.error().message);
  std::optional<std::vector<TraceEvent>> events = parse_trace(*text);
  if (!events) return refuse("trace_incomplete", "the record of the run is malformed or too long");
  ObservedRun observed;
  observed.cwd = cc.cwd;
  observed.work_dir = cc.work_dir;
  observed.env = plan.run_env;
  // Set by the plan itself: the recorder, and the dependency variables
  // pointing into the work dir (their mode and target are in the direct key).
  observed.ignored_env = {"LD_PRELOAD", "CCPOOL_TRACE"};
  if (cc.dep_append)
    observed.ignored_env.insert(observed.ignored_env.end(),
                                {"DEPENDENCIES_OUTPUT", "SUNPRO_DEPENDENCIES"});
  observed.start_ns = to_ns(run.started);
  observed.date_pinned = cc.sde_pinned;
  observed.nvcc = cc.nvcc;
  for (const auto& [name, bytes] : run.outputs) observed.output_texts.push_back(bytes);
  observed.output_texts.push_back(run.stdout_data);
  observed.output_texts.push_back(run.stderr_data);
  Observation seen = conclude_observed(hasher, listings, observed, *events);
  if (!seen.why.empty()) return refuse(std::move(seen.why.code), std::move(seen.why.text));
  ManifestEntry entry = std::move(seen.entry);
  const Digest key = result_key(plan.flight_key, entry);
  entry.result_key = key;

  Manifest manifest;
  if (manifests.load) {
    if (std::optional<std::string> blob = manifests.load(plan.flight_key)) {
      if (std::optional<Manifest> old = parse_manifest(*blob)) manifest = std::move(*old);
    }
  }
  std::vector<ManifestEntry> kept;
  kept.push_back(std::move(entry));
  for (ManifestEntry& e : manifest.entries) {
    if (kept.size() >= kMaxManifestEntries) break;
    if (e.result_key != key) kept.push_back(std::move(e));
  }
  manifest.entries = std::move(kept);
  std::string blob = serialize_manifest(manifest);
  if (manifests.save) manifests.save(plan.flight_key, blob);
  // Parsed beside the compile, so that the first hit neither reads nor
  // parses it; the memo learns from the same parse. Deferred: a lesson for
  // Planner::learn_lessons, with the requester's view.
  if (defer_lessons) {
    Lesson lesson{plan.flight_key, cc.cwd, plan.run_env, memo && memo->in_own_view()};
    MutexLock lock(&mutex);
    if (lessons.size() >= max_lessons) {
      lessons.pop_front();
      lessons_dropped.fetch_add(1);
    }
    lessons.push_back(std::move(lesson));
  } else {
    std::shared_ptr<const ParsedManifest> parsed = parsed_manifest(plan.flight_key, blob);
    if (parsed && !parsed->entries.empty())
      learn_record(cc.cwd, plan.run_env, parsed->entries.front());
  }
  done.store = true;
  done.mode = KeyMode::kDirect;
  done.result_key = key;
  return done;
}

}  // namespace ccpool::compiler
