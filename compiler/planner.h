// The compiler models: turn one exec request into a Plan (what to run, the
// cache key, the outputs), validate direct-mode manifests, and compute result
// keys after a run. Knows nothing of the store, sockets or the pool; the
// service owns execution, storage and delivery. Exact key material:
// docs/cache-keys.md. A false hit is the worst possible bug, so every doubt
// becomes a pass-through or a miss.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/hash.h"

namespace ccpool::compiler {

struct Request {
  std::string program;            // resolved absolute path of the tool
  std::vector<std::string> argv;  // argv[0] as the caller gave it
  std::string cwd;
  std::vector<std::string> env;  // caller's environment, "K=V"
  std::vector<std::string> declared_inputs,
      declared_outputs;  // from `ccpool exec --input/--output` (cwd-relative or absolute)
};

enum class PlanKind { kPassthrough, kGeneric, kCompiler };

// Which rule made a stored result's key.
enum class KeyMode {
  kExact,   // the plan's key alone (generic jobs, ptxas)
  kDirect,  // C/C++ and nvcc: the direct key plus the record of every lookup the run made
};

struct OutputSpec {
  std::string name;  // stable name in the stored record ("out", "dep", "dwo", "gcno", "su", or the
                     // declared path for generic jobs)
  std::string run_path;      // absolute path where the tool writes it when this plan is executed
                             // (inside work_dir when redirected)
  std::string deliver_path;  // absolute path where THIS requester wants it
  bool optional = false;  // missing after a successful run is not an error (then it is simply not
                          // stored/delivered)
};

// Model-private state carried from plan() to lookup()/finish()/deliver_bytes()
// (parsed arguments, include search order, dependency-file location).
struct PlanDetail;

// A file the runner copies into the work dir before the tool starts, in the
// requester's view (an archive that ar or ranlib updates: the tool rewrites
// its copy, never the requester's file). `content` is what the key holds; a
// copy of other bytes fails the run (copy_seed_files).
struct SeedFile {
  std::string from;  // absolute, the requester's file
  std::string to;    // absolute, inside the work dir; created, never replaced
  Digest content;
};

struct Plan {
  PlanKind kind = PlanKind::kPassthrough;
  std::string reason;       // why pass-through, for humans (logged and shown), empty otherwise
  std::string reason_code;  // why pass-through, a stable code (docs/cache-keys.md), empty otherwise
  Digest flight_key;  // identical requests in flight share one execution iff equal (for direct
                      // mode: the manifest key)
  bool direct_mode =
      false;  // true: the result key comes from lookup()/finish(); false: result key == flight_key
  KeyMode key_mode =
      KeyMode::kExact;    // the rule a stored result's key is made by (what `ccpool explain` says)
  std::string job_class;  // memory-estimate class, e.g. "g++ -O3 -shared" (tool basename + a few
                          // flags that drive memory)
  std::string tool;       // display name (basename)
  // What to execute. Filled for pass-through plans too (argv unchanged,
  // request cwd, environment minus the shim).
  std::string run_program;  // absolute path to execute (request.program); run_argv[0] stays as the
                            // caller gave it
  std::vector<std::string>
      run_argv;  // may differ from argv: -o redirected into work_dir, -MD -MF <work_dir>/... added
  std::string run_cwd;
  std::vector<std::string> run_env;  // environment for the tool (shim removed)
  bool uses_work_dir = false;  // run_argv/run_path reference work_dir: the service must create it
                               // before running and delete it after
  // Non-empty: the record file the tool's recorder appends to
  // (libccpool-trace.so, named by run_env). The runner creates it empty,
  // mode 0600, inside the work dir before starting the tool.
  std::string trace_path;
  std::vector<OutputSpec> outputs;
  std::vector<SeedFile> seeds;               // copied into the work dir before the run
  std::vector<std::string> inputs;           // for metadata (source, declared inputs)
  std::shared_ptr<const PlanDetail> detail;  // opaque; null for pass-through plans
};

struct ManifestStorage {  // the service backs these with store blobs
  std::function<std::optional<std::string>(const Digest&)> load;
  std::function<void(const Digest&, const std::string&)> save;
  // Optional: hash_bytes() of the blob load() would return, without reading
  // it. A lookup whose manifest is parsed in memory already then skips
  // load() (decompressing and checksumming a manifest of a few dozen
  // headers was a third of a hit's instructions).
  std::function<std::optional<Digest>(const Digest&)> content;
};

// Stable reason codes: the text of Plan::reason / Finished::why_not before
// its first ':' (what follows is for humans).
inline constexpr std::string_view kReasonHasIncludeNonliteral = "has_include_nonliteral";
inline constexpr std::string_view kReasonPchUnsupported = "pch_unsupported";

struct Finished {
  bool store = false;              // false: serve this run's outputs to the current waiters only
  KeyMode mode = KeyMode::kExact;  // when store: how result_key was made
  std::string why_not;             // when !store: why, for humans (logged)
  std::string why_not_code;        // when !store: a stable code (docs/cache-keys.md)
  Digest result_key;               // valid when store
};

// What one execution produced, as the runner saw it. Outputs are read by the
// runner (at their run_path); conclude() does not touch the filesystem for
// them.
struct RunFacts {
  std::chrono::system_clock::time_point started;  // taken before the tool was spawned
  bool success = false;  // exit 0, no signal, no timeout, output not truncated
  std::vector<std::pair<std::string, std::string>> outputs;  // OutputSpec::name -> bytes, as read
  bool outputs_complete = true;                              // every non-optional output was read
  std::string stdout_data, stderr_data;
};

// What the run proves: whether to store it, under which result key, the
// manifest blob to store under plan.flight_key after the result (direct
// mode), and, when not stored, why (a stable code).
struct Conclusion {
  Finished finished;
  std::optional<std::string> manifest;
  bool validated = false;  // the inputs did not change during the run: joiners may compare with it
};

// Copies each of plan.seeds (after the work dir exists, before the tool
// starts): "" when every copy holds the bytes its key names, else why not
// (the run must not start: the requester's file changed since the plan).
std::string copy_seed_files(const Plan& plan);

struct PlannerOptions {
  // libccpool-trace.so: preloaded into every C/C++ compile the planner caches.
  // Empty: CCPOOL_TRACE_LIBRARY, else ../lib/libccpool-trace.so beside the
  // running executable; when none exists, C/C++ compiles pass through
  // (trace_unavailable).
  std::string trace_library;
  // Keep the answers of recorded lookups across requests, re-checking only
  // what the kernel reported changed (compiler/validation_memo.h; the
  // service turns it on unless told not to). Off: every lookup validates
  // every recorded answer.
  bool validation_memo = false;
  // Test seam: the memo's events are read and dropped (a filesystem that
  // reports nothing); lookups must then validate in full.
  bool validation_memo_drops_events = false;
  // What a stored miss teaches (its new manifest parsed for the first hit,
  // and, with the memo, the answers its record holds) is kept as a lesson
  // for learn_lessons() instead of being learned on the requester's path.
  // The service learns them when it is idle: on a build that fills every
  // core, that work would otherwise lengthen the build (docs/cache-keys.md,
  // "The validation memo"). Off: learned at once, inside finish().
  bool defer_lessons = false;
  // At most this many lessons wait; past it the oldest is dropped (its entry
  // is then learned on its second hit, as after a restart). Each holds the
  // requester's environment, a few KiB.
  size_t max_lessons = 1024;
};

class Planner {
 public:
  Planner();
  explicit Planner(PlannerOptions options);
  ~Planner();
  Planner(const Planner&) = delete;
  Planner& operator=(const Planner&) = delete;

  // Thread-safe. work_dir is a unique absolute path the service creates only
  // if the plan is executed (and only when uses_work_dir); plan() never creates
  // it. Errors are internal failures only; anything uncacheable is a
  // kPassthrough plan with a reason.
  Result<Plan> plan(const Request& request, const std::string& work_dir);

  // Direct mode: validates the manifest stored under plan.flight_key, newest
  // entry first, by re-hashing every recorded input and checking that no
  // recorded negative path exists. Returns the result key to fetch, or
  // nullopt (miss). Non-direct plans: returns plan.flight_key.
  Result<std::optional<Digest>> lookup(const Plan& plan, const ManifestStorage& manifests);

  // After an exit-0 run of plan.run_argv (outputs still at their run_path).
  // started: a time taken before the tool was spawned; any input modified at
  // or after it makes store=false. Direct mode: records the manifest entry.
  Result<Finished> finish(const Plan& plan, std::chrono::system_clock::time_point started,
                          const ManifestStorage& manifests);
  Result<Finished> finish(const Plan& plan, const RunFacts& run, const ManifestStorage& manifests);

  // The one way a run ends, for the service and for tests alike: checks that
  // every required output came back, runs finish(), refuses replays that
  // would name an unkeyed path, and returns the manifest to store (direct
  // mode) instead of saving it. For failed runs too: a failure is shared only
  // with joiners whose view validates against its manifest.
  Conclusion conclude(const Plan& plan, const RunFacts& run, const ManifestStorage& manifests);

  // Whether `joiner` (same flight key) may take the run that `run` concluded:
  // its own view validates against the run's manifest entry exactly like a
  // hit (content-keyed plans: the flight key is the result key).
  bool accepts(const Plan& joiner, const Conclusion& run);

  // After finish() said store: "" when this run's stdout/stderr may be
  // replayed to every requester with the same result key, else why not (the
  // caller then serves the run to its own waiters only and stores nothing).
  // ptxas is keyed without its temp paths, yet its warnings name the input
  // path ("ptxas /tmp/tmpab.ptx, line 7; warning : ...").
  std::string replay_blocker(const Plan& plan, std::string_view out, std::string_view err) const;

  // The bytes to write at output.deliver_path for `requester`, given the
  // stored bytes (which may come from another requester's run); nullopt when
  // they are the stored bytes as they are (most outputs: no copy of a large one).
  std::optional<std::string> deliver_bytes(const Plan& requester, const OutputSpec& output,
                                           std::string_view stored) const;

  // PlannerOptions::defer_lessons: learns the pending lessons, oldest first,
  // while keep_going() says so (asked before each); returns how many it took
  // (each counted as learned or unlearned). Each reads its manifest through
  // `manifests` again (the newest entry is learned, validated first like a
  // hit) and learns nothing when it is gone.
  // Thread-safe; lookups may run meanwhile (a hit before its lesson learns
  // what it validated itself).
  size_t learn_lessons(const ManifestStorage& manifests, const std::function<bool()>& keep_going);
  size_t pending_lessons() const;

  // Work done so far (test seams): manifest blobs parsed (lookup() parses a
  // given manifest's bytes once, then reuses them) and directory listings
  // read for negative-path checks.
  struct Counters {
    uint64_t manifest_parses = 0;
    uint64_t directory_reads = 0;
    // The validation memo (zero without it): answers served without their
    // own system calls, kept, refused, not learned yet (first use), writer
    // probes, resets, watches held.
    uint64_t memo_served = 0, memo_learned = 0, memo_refused = 0, memo_deferred = 0;
    uint64_t memo_probes = 0, memo_resets = 0, memo_watches = 0, memo_rechecked = 0;
    uint64_t memo_sets_served = 0;
    // PlannerOptions::defer_lessons: learned (the entry handed to the
    // memo), taken but teaching nothing (its manifest gone, its entry not
    // matching its key, or the requester in another view), and dropped
    // unlearned (the oldest, past PlannerOptions::max_lessons pending).
    uint64_t lessons_learned = 0, lessons_unlearned = 0, lessons_dropped = 0;
  };
  Counters counters() const;
  bool has_validation_memo() const;  // asked for, and inotify available

  struct Impl;

 private:
  std::unique_ptr<Impl> m_impl;
};

}  // namespace ccpool::compiler
