// What a traced run read, as a manifest entry, and how a later request
// checks that every recorded lookup gives the same answer in its own view.
//
// conclude_observed() turns the events of one run (compiler/trace_record.h)
// into the entry: every file found and read, by content; every path that
// was absent (open/stat/access/exec ENOENT or ENOTDIR), as an absent path
// checked one parent directory at a time; every other answer (a stat's
// file type, access(2) with its mode, readlink, realpath, a directory's
// names, a failed open's errno) as a check; every environment variable the
// run read from the requester's environment, with its value; every
// executable and shared object of every process, by content. It refuses
// (WhyNot) where the record cannot vouch for the run: a process that ran
// untraced (static, setuid, LD_PRELOAD dropped), a chdir, a lookup relative
// to an unknown directory, a date made from the clock (localtime & co:
// __DATE__/__TIME__/__TIMESTAMP__) unless SOURCE_DATE_EPOCH pins it, an
// input that changed during the run or was overwritten by it. Paths the run
// wrote (outputs, temp files) and its own /proc/self are not lookups. An
// nvcc run has a rule of its own (ObservedRun::nvcc).
// docs/cache-keys.md ("The record") is the reference.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compiler/dir_listing.h"
#include "compiler/file_hasher.h"
#include "compiler/manifest.h"
#include "compiler/trace_record.h"
#include "compiler/validation_memo.h"
#include "compiler/why_not.h"

namespace ccpool::compiler {

// The run the record belongs to.
struct ObservedRun {
  std::string cwd;                       // the tool's cwd (relative paths resolve here)
  std::string work_dir;                  // outputs live here: never a lookup
  std::vector<std::string> env;          // the tool's environment as the service started it
  std::vector<std::string> ignored_env;  // names the service set itself (LD_PRELOAD, CCPOOL_TRACE)
  int64_t start_ns = 0;                  // anything found changed at or after this: not stored
  bool date_pinned = false;  // SOURCE_DATE_EPOCH set and the tool honours it (gcc: gmtime)
  // An nvcc -c (docs/cache-keys.md, "nvcc"). Its rule: nvcc's listing of a
  // directory it wrote tmpxft_ files in (its cleanup at exit) is not a
  // lookup; the clock reads of its front ends cudafe++ and cicc (at startup,
  // whatever they compile: they get gcc -E output, in which gcc expanded
  // every date macro the source used, and the record saw that) are allowed
  // when no file the run opened names __DATE__, __TIME__ or __TIMESTAMP__;
  // anything that asks the GPU (__nvcc_device_query, /dev/nvidia*, libcuda)
  // is refused.
  bool nvcc = false;
  // Output bytes (objects, stdout, stderr, side outputs): when none holds
  // the cwd, answers that hold it (realpath, getcwd, PWD) are recorded
  // relative to it, so a request from another directory can share.
  std::vector<std::string> output_texts;
};

// The entry (result_key not set), or why not.
struct Observation {
  ManifestEntry entry;
  WhyNot why;
};

Observation conclude_observed(FileHasher& hasher, DirListings& listings, const ObservedRun& run,
                              const std::vector<TraceEvent>& events);

// The requester a lookup validates for.
struct ObservedView {
  const std::string& cwd;
  const std::vector<std::string>& env;  // the requester's run environment
};

// True when the environment and cwd checks of `entry` hold for `view` (no
// system call: tried first).
bool environment_holds(const ManifestEntry& entry, const ObservedView& view);

// lstat(2) answers of one validation, shared by its file and real-path
// checks: a path that is not a link is stat'ed once for both.
class LinkStats {
 public:
  // lstat(2) of `abs` (nullopt: it fails), memoized for this validation.
  const std::optional<FileStat>& of(const std::string& abs);

 private:
  std::map<std::string, std::optional<FileStat>> m_memo;
};

// True when every check of `entry` other than its files and absent paths
// (validated by the caller, memoized) gives the recorded answer for `view`.
// With `memo`: a type, link, real-path or access answer the memo still
// vouches for is not asked again, and, with `learn`, what was asked is added to it.
// `all_memo`, if given, is cleared when an answer was not the memo's.
bool checks_hold(const ManifestEntry& entry, const ObservedView& view, DirListings& listings,
                 LinkStats* link_stats = nullptr, ValidationMemo* memo = nullptr,
                 std::vector<ValidationMemo::Item>* learn = nullptr, bool* all_memo = nullptr);

// "\x01" at the start of an answer stands for the job's cwd.
inline constexpr char kCwdMark = '\x01';

}  // namespace ccpool::compiler
