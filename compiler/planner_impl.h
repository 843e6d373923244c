// Internals shared by the model files: Planner::Impl (memo tables) and
// PlanDetail (what plan() hands to lookup()/finish()). Not a public header.
// The helpers the models share are in headers of their own: path_names.h,
// key_hash.h, plan_helpers.h; the tool identity in tool_identity.h.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/thread_annotations.h"
#include "compiler/dir_listing.h"
#include "compiler/file_hasher.h"
#include "compiler/manifest.h"
#include "compiler/observed.h"
#include "compiler/planner.h"
#include "compiler/source_scan.h"
#include "compiler/subprocess.h"
#include "compiler/tool_identity.h"
#include "compiler/validation_memo.h"
#include "compiler/why_not.h"

namespace ccpool::compiler {

// An input whose content went into a key at plan() time. finish() re-hashes
// it: a change between plan() and the run would otherwise store the new
// output under the old key.
struct CheckedInput {
  std::string path;  // absolute
  Digest content;
};

struct CcDetail {
  Family family = Family::kUnknown;
  std::string cwd;
  std::string work_dir;
  bool sde_pinned = false;  // gcc with SOURCE_DATE_EPOCH: __DATE__/__TIME__ from gmtime
  bool dep_append = false;  // DEPENDENCIES_OUTPUT/SUNPRO_DEPENDENCIES append to the file
  bool nvcc = false;        // an nvcc -c (nvcc_model.cpp): the record's nvcc rule applies
  // Whether the validation memo serves this requester (in_own_view(), two
  // procfs stats), when the plan asked already; the lookup runs in the
  // plan's view, so it takes this answer instead of asking again.
  std::optional<bool> memo_view;
};

// A manifest as lookup() uses it: parsed once per (direct key, bytes), with
// each entry's absent paths grouped by parent directory (as written; a
// relative one resolves against the requester's cwd) and its result key
// already checked against the direct key.
struct NegativeGroup {
  std::string dir;                  // "" for a bare name (the cwd)
  std::vector<std::string> names;   // no '/'; must not be regular files
  std::vector<std::string> absent;  // no '/'; must not exist (PCH candidates)
  std::string memo_key;             // the validation memo's key of names and absent (hex)
};
struct ParsedEntry {
  ManifestEntry entry;  // negatives and absent paths moved into groups
  bool key_ok = false;  // result_key == H(direct key, entry)
  std::vector<NegativeGroup> groups;
};
struct ParsedManifest {
  std::vector<ParsedEntry> entries;
};

struct PlanDetail {
  std::vector<CheckedInput> inputs;
  std::vector<std::pair<std::string, FileStat>> tools;  // binaries whose identity is keyed
  std::optional<CcDetail> cc;                           // set for traced C/C++ and nvcc plans
  // Strings the key leaves out (ptxas: its input and output paths) that the
  // tool may still print; a run whose stdout/stderr holds one is not stored
  // (Planner::replay_blocker).
  std::vector<std::string> unkeyed_texts;
  // ar and ranlib (ar_model.cpp): the output "out" is an archive, stored only
  // in GNU ar's deterministic form (archive_not_deterministic, ar_args.h).
  bool archive_output = false;
  // Paths that did not exist at plan time and must not exist after the run
  // (ar's archive operand: the key says the run started from none).
  std::vector<std::string> absent_paths;
};

// Re-verifies tools and plan-time inputs (planner.cpp); returns why not to
// store, or empty.
WhyNot verify_plan_inputs(Planner::Impl& impl, const PlanDetail& detail,
                          std::chrono::system_clock::time_point started);

struct Planner::Impl {
  FileHasher hasher;
  std::string trace_library;  // libccpool-trace.so; empty: C/C++ compiles pass through

  Result<ToolIdentity> tool_identity(const std::string& path);
  // `tool --version` family, memoized by identity.
  Family family(const ToolIdentity& tool, const std::vector<std::string>& env);
  // Cached helper output keyed by an arbitrary digest (identity + args + env).
  Result<HelperOutput> memo_helper(const Digest& key, const std::vector<std::string>& argv,
                                   const std::vector<std::string>& env, const std::string& cwd,
                                   const std::string& program = "");
  // The same, building the helper's environment only when the helper runs
  // (a memo hit, every compile after the first, needs none).
  Result<HelperOutput> memo_helper(const Digest& key, const std::vector<std::string>& argv,
                                   const std::function<std::vector<std::string>()>& make_env,
                                   const std::string& cwd, const std::string& program = "");

  // The content digest of a compile's source (plan_cc): the validation
  // memo's answer when it keeps the file and `memo_view` (the requester
  // sees the files as the service does), else read (FileHasher). The memo's answer holds
  // within one timestamp tick, where a stat's does not, so a source written
  // less than two seconds ago is not read again on every hit, and our own
  // read does not count as someone else's open of a file the memo keeps.
  Result<Digest> source_digest(const std::string& abs, bool memo_view);
  Result<Plan> plan_generic(const Request& request, const ToolIdentity& tool);
  Result<Plan> plan_ptxas(const Request& request, const ToolIdentity& tool);
  Result<Plan> plan_cc(const Request& request, const ToolIdentity& tool, Family family,
                       const std::string& work_dir);
  Result<Plan> plan_nvcc(const Request& request, const ToolIdentity& tool,
                         const std::string& work_dir);
  // GNU ar (r/q) and ranlib; nullopt when `tool` is not one of them.
  // Whether plan_archiver() takes a tool of this real name (GNU ar or ranlib).
  static bool is_archiver_tool(std::string_view real_name);
  std::optional<Result<Plan>> plan_archiver(const Request& request, const ToolIdentity& tool,
                                            const std::string& work_dir);
  Result<std::optional<Digest>> lookup_cc(const Plan& plan, const ManifestStorage& manifests);
  // Whether every recorded lookup of `pe` gives the same answer for `view`.
  // With `memo`: files and absent paths the memo still vouches for are not
  // checked again, and, with `learn`, what was checked is added to it (to be
  // kept once the whole entry held). `all_memo`, if given, is cleared when
  // an answer needed a system call of its own (not served by the memo).
  bool entry_holds(const ParsedEntry& pe, const ObservedView& view, DirListings::Scope& dirs,
                   ValidationMemo* memo = nullptr,
                   std::vector<ValidationMemo::Item>* learn = nullptr, bool* all_memo = nullptr);
  Result<Finished> finish_cc(const Plan& plan, const RunFacts& run,
                             const ManifestStorage& manifests);
  // Keeps what a miss recorded in the validation memo (in the service's own
  // view only), so that the first hit of `pe` is served from it; validated
  // first as a hit in the requester's view (`cwd`, `env`) would be.
  void learn_record(const std::string& cwd, const std::vector<std::string>& env,
                    const ParsedEntry& pe);
  // PlannerOptions::defer_lessons: what finish_cc leaves for
  // Planner::learn_lessons (the manifest is read again then).
  struct Lesson {
    Digest flight_key;
    std::string cwd;
    std::vector<std::string> env;  // the requester's run environment
    bool own_view = false;         // the requester saw the files as the service does
  };
  bool defer_lessons = false;
  size_t max_lessons = 0;  // PlannerOptions::max_lessons
  std::atomic<uint64_t> lessons_learned{0}, lessons_unlearned{0}, lessons_dropped{0};

  // Scan flags and include spellings of a file's content, memoized by
  // content digest.
  Result<ScanInfo> scan(const std::string& path, const Digest& content);
  // The parsed form of a manifest blob stored under `direct`, memoized by
  // H(direct, bytes); nullptr when malformed.
  std::shared_ptr<const ParsedManifest> parsed_manifest(const Digest& direct,
                                                        const std::string& blob);
  // The parsed form of the blob whose hash_bytes() is `content`, if in memory.
  std::shared_ptr<const ParsedManifest> memoized_manifest(const Digest& direct,
                                                          const Digest& content);

  static constexpr size_t kMaxParsedManifests = 256;  // memo cleared when full
  DirListings listings;
  std::atomic<uint64_t> manifest_parses{0};
  std::unique_ptr<ValidationMemo> memo;  // PlannerOptions::validation_memo; null: off or no inotify

  // The memo tables: scans by content, parsed manifests by bytes, families
  // and helper outputs by tool identity. Each lookup copies out under the
  // lock; nothing is computed while it is held.
  Mutex mutex;
  std::map<Digest, ScanInfo> scans GUARDED_BY(mutex);
  std::map<Digest, std::shared_ptr<const ParsedManifest>> parsed_manifests GUARDED_BY(mutex);
  std::map<Digest, Family> families GUARDED_BY(mutex);
  std::map<Digest, HelperOutput> helper_memo GUARDED_BY(mutex);
  std::deque<Lesson> lessons GUARDED_BY(mutex);
};

}  // namespace ccpool::compiler
