// Absence checks for direct-mode negative paths, one directory at a time.
// A manifest entry lists paths that must not be regular files; most of them
// share a few parent directories. Instead of one stat(2) per path, each
// parent gets one stat: missing (or not a directory) means every path under
// it is absent; otherwise the names in the directory come from a listing
// memoized by the directory's (dev, ino, mtime_ns, ctime_ns). Adding,
// removing or renaming an entry updates the directory's mtime and ctime, so a
// memoized listing can only be stale if the directory changed within one
// timestamp tick of being read: listings of directories modified less than
// 2 s ago are not memoized (the same racy rule as FileHasher). A name present
// in the listing still gets a real stat(2) of the path (a regular file, or a
// symlink to one, is a shadowing header; anything else is not).
//
// Within one validation (a Scope), a parent seen missing or not a directory,
// or one whose name is missing from the listing of an ancestor the scope has
// already stat'ed, is known missing without a stat of its own: path
// resolution fails at that component. Most negative paths of a system header
// sit under search directories that do not exist (`include-fixed/bits`, ...),
// so this turns a stat per missing directory into a stat per search directory.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_set>
#include <vector>

#include "base/hash.h"
#include "base/thread_annotations.h"

namespace ccpool::compiler {

struct FileStat;

class DirListings {
 public:
  // How a directory is stat'ed (a test seam: a frozen stat stands for a
  // filesystem whose timestamps did not move within one tick).
  using StatFunction = std::optional<FileStat> (*)(const std::string& path);
  explicit DirListings(StatFunction stat_dir = nullptr) : m_stat_dir(stat_dir) {}

  // True when, right now, no dir/name (for each name) is a regular file
  // (stat(2) following symlinks). Names contain no '/'.
  bool none_regular(const std::string& dir, const std::vector<std::string>& names) {
    return check(dir, names, {});
  }

  // True when, right now, no dir/name in `not_regular` is a regular file and
  // no dir/name in `absent` exists at all (stat(2) following symlinks: a
  // dangling link does not exist, as for open(2)). Names contain no '/'.
  bool check(const std::string& dir, const std::vector<std::string>& not_regular,
             const std::vector<std::string>& absent);

  // XXH3 of the directory's entry names (sorted, "." and ".." left out, each
  // a length-prefixed field), or nullopt when `dir` is not a readable
  // directory. Uses the same memoized listing.
  std::optional<Digest> names_digest(const std::string& dir);

  // The entry names of `dir` right now, from the same memo. is_dir false:
  // `dir` is not a directory (nothing can exist under it); names null: a
  // directory that cannot be read (ask stat(2) for each path).
  struct Listing {
    bool is_dir = false;
    std::shared_ptr<const std::unordered_set<std::string>> names;
  };
  Listing list(const std::string& dir);

  // One validation's view of directories, used by one thread for one lookup
  // and then dropped (never shared between lookups, so every lookup stats
  // afresh). Each directory is stat'ed at most once per scope; see the top of
  // this file for the ones that are not stat'ed at all.
  class Scope {
   public:
    explicit Scope(DirListings& listings) : m_listings(listings) {}
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    // As DirListings::check, through this scope.
    bool check(const std::string& dir, const std::vector<std::string>& not_regular,
               const std::vector<std::string>& absent);
    Listing list(const std::string& dir);

   private:
    // True when a directory this scope stat'ed proves `dir` missing.
    bool known_missing(std::string_view dir) const;
    DirListings& m_listings;
    // The directories this scope stat'ed (a few per lookup: the search
    // directories and the missing ones nearest to them). Inferred ones are
    // not kept: they are cheaper to infer again than to look up.
    std::vector<std::pair<std::string, Listing>> m_stated;
  };

  // Directory reads done so far (memo misses); a test seam.
  uint64_t reads() const { return m_reads.load(); }

  static constexpr size_t kMaxEntries = 4096;  // memo cleared when it reaches this

 private:
  using Names = std::unordered_set<std::string>;
  using Key = std::tuple<uint64_t, uint64_t, int64_t, int64_t>;  // dev, ino, mtime_ns, ctime_ns
  // The names in `dir` (whose stat is `st`), from the memo or read now;
  // nullptr when it cannot be read.
  std::shared_ptr<const Names> listing(const std::string& dir, const FileStat& st);
  // check() for a directory whose listing is `names` (null: unreadable).
  static bool none_present(const std::string& dir, const Names* names,
                           const std::vector<std::string>& not_regular,
                           const std::vector<std::string>& absent);
  std::optional<FileStat> stat_dir(const std::string& dir) const;
  StatFunction m_stat_dir;  // null: stat_path
  Mutex m_mutex;
  std::map<Key, std::shared_ptr<const Names>> m_memo GUARDED_BY(m_mutex);
  std::atomic<uint64_t> m_reads{0};
};

}  // namespace ccpool::compiler
