// Lookups a compile makes that its `.d` file does not show, recorded for the
// direct-mode manifest (docs/cache-keys.md, "Precompiled headers" and
// "__has_include"):
// - the answer of every literal `__has_include` / `__has_include_next` probe,
//   walked through the search order the compiler uses;
// - every precompiled header gcc or clang would take instead of a header
//   (NAME.gch, a NAME.gch/ directory, clang's NAME.pch), present or absent.
// One LookupRecorder serves one finish(): it stats each path once and checks
// that nothing it records changed at or after the compile's start.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/hash.h"
#include "compiler/dir_listing.h"
#include "compiler/file_hasher.h"
#include "compiler/include_scan.h"

namespace ccpool::compiler {

// What a finish() adds to the manifest entry besides the .d file's inputs.
struct LookupRecord {
  std::map<std::string, Digest> files;  // found: path as formed -> content
  std::set<std::string> not_regular;    // must stay "not a regular file"
  std::set<std::string> absent;         // must stay nonexistent (PCH candidates)
  std::map<std::string, Digest> dirs;   // NAME.gch/ directory -> digest of its names
};

// The search order of one compile, as the compiler reported it.
struct SearchOrder {
  std::vector<std::string> quote;    // -iquote directories
  std::vector<std::string> bracket;  // everything `#include <...>` searches
};

// Paths as gcc forms them: "" is the cwd, "/" the root.
std::string join_dir(const std::string& dir, const std::string& name);
std::string dir_of(const std::string& path);
bool has_prefix_dir(const std::string& path, const std::string& dir);  // path is below dir

class LookupRecorder {
 public:
  LookupRecorder(FileHasher& hasher, DirListings& listings, std::string cwd, int64_t start_ns);
  LookupRecorder(const LookupRecorder&) = delete;
  LookupRecorder& operator=(const LookupRecorder&) = delete;

  // Records what decides `probe`'s answer in the file at `includer` (path as
  // in the .d). Every plausible reading of the search is walked (the
  // includer's directory first for "..."; for _next, after each search
  // directory the includer can be under, and the whole chain): candidates up
  // to the first regular file stay non-regular, that file keeps its content.
  // Returns why not to store ("" when recorded).
  std::string probe(const std::string& includer, const HasIncludeProbe& probe, const SearchOrder& order);

  // Records, for `name` searched in `dirs` in order, each candidate's PCH
  // siblings (dir/name + suffix, for each suffix) and that candidates before
  // the first regular dir/name stay non-regular. Returns why not to store.
  std::string pch_search(const std::vector<std::string>& dirs, const std::string& name,
                         const std::vector<std::string>& suffixes);

  // Records one PCH candidate: a regular file by content, a directory by its
  // names and every file in it, an absent path as absent.
  std::string pch_candidate(const std::string& path);

  // "" when no directory in `dirs` holds an entry named *.gch right now;
  // otherwise why not to store (pch_unsupported).
  std::string no_pch_in(const std::vector<std::string>& dirs);

  // Paths (as formed) the compile is known to have read: regular files,
  // so no stat(2) is needed to stop a walk there.
  void know_regular(const std::string& path) { m_kinds.emplace(path, Kind::kRegular); }

  LookupRecord& record() { return m_record; }

 private:
  enum class Kind { kAbsent, kRegular, kDirectory, kOther };
  Kind kind_of(const std::string& path);  // as formed; memoized for this finish
  std::string add_file(const std::string& path);
  std::string walk(const std::vector<std::string>& dirs, const std::string& name,
                   const std::vector<std::string>& suffixes, bool keep_found);
  std::string resolve(const std::string& path) const;

  FileHasher& m_hasher;
  DirListings& m_listings;
  std::string m_cwd;
  int64_t m_start_ns;
  std::unordered_map<std::string, Kind> m_kinds;
  std::unordered_map<std::string, DirListings::Listing> m_dirs;  // parent (as formed) -> its names, for this finish
  std::vector<std::string> m_missing_dirs;  // search directories absent at record time
  bool m_missing_known = false;
  LookupRecord m_record;
};

}  // namespace ccpool::compiler
