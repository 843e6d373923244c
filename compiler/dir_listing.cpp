#include "compiler/dir_listing.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <string_view>

#include "compiler/file_hasher.h"

namespace ccpool::compiler {
namespace {

constexpr int64_t kRacyNs = 2'000'000'000;

bool is_regular(const std::string& path) {
  std::optional<FileStat> st = stat_path(path);
  return st && S_ISREG(st->mode);
}

std::string join(const std::string& dir, const std::string& name) {
  return !dir.empty() && dir.back() == '/' ? dir + name : dir + "/" + name;
}

}  // namespace

std::optional<FileStat> DirListings::stat_dir(const std::string& dir) const {
  return m_stat_dir ? m_stat_dir(dir) : stat_path(dir);
}

std::shared_ptr<const DirListings::Names> DirListings::listing(const std::string& dir,
                                                               const FileStat& st) {
  Key key{st.dev, st.ino, st.mtime_ns, st.ctime_ns};
  {
    MutexLock lock(&m_mutex);
    auto it = m_memo.find(key);
    if (it != m_memo.end()) return it->second;
  }
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return nullptr;
  auto fresh = std::make_shared<Names>();
  while (struct dirent* e = ::readdir(d)) fresh->insert(e->d_name);
  ::closedir(d);
  std::optional<FileStat> after = stat_dir(dir);
  bool stable = after && after->dev == st.dev && after->ino == st.ino &&
                after->mtime_ns == st.mtime_ns && after->ctime_ns == st.ctime_ns;
  m_reads.fetch_add(1);
  int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  // Only a listing read in one piece from a directory untouched for 2 s is
  // remembered; otherwise it answers this check only (like one stat each).
  if (stable && st.mtime_ns <= now_ns - kRacyNs && st.ctime_ns <= now_ns - kRacyNs) {
    MutexLock lock(&m_mutex);
    if (m_memo.size() >= kMaxEntries) m_memo.clear();
    m_memo.emplace(key, fresh);
  }
  return fresh;
}

bool DirListings::check(const std::string& dir, const std::vector<std::string>& not_regular,
                        const std::vector<std::string>& absent) {
  std::optional<FileStat> st = stat_dir(dir);
  // A path whose parent does not exist (or is not a directory) does not
  // exist: stat(2) fails with ENOENT/ENOTDIR.
  if (!st || !S_ISDIR(st->mode)) return true;
  std::shared_ptr<const Names> names = listing(dir, *st);
  return none_present(dir, names.get(), not_regular, absent);
}

bool DirListings::none_present(const std::string& dir, const Names* names,
                               const std::vector<std::string>& not_regular,
                               const std::vector<std::string>& absent) {
  // Unlisted (searchable but unreadable, or vanished): ask for each path.
  auto listed = [&](const std::string& n) {
    return !names || n.empty() || n == "." || n == ".." || names->count(n) > 0;
  };
  for (const std::string& n : not_regular) {
    if (listed(n) && is_regular(join(dir, n))) return false;
  }
  for (const std::string& n : absent) {
    if (listed(n) && stat_path(join(dir, n))) return false;
  }
  return true;
}

bool DirListings::Scope::check(const std::string& dir, const std::vector<std::string>& not_regular,
                               const std::vector<std::string>& absent) {
  Listing l = list(dir);
  if (!l.is_dir) return true;  // as in DirListings::check
  return none_present(dir, l.names.get(), not_regular, absent);
}

DirListings::Listing DirListings::Scope::list(const std::string& dir) {
  for (const auto& [path, listing] : m_stated) {
    if (path == dir) return listing;
  }
  if (known_missing(dir)) return Listing{};
  Listing l = m_listings.list(dir);
  m_stated.emplace_back(dir, l);
  return l;
}

// Finds the nearest directory this scope stat'ed that is an ancestor of
// `dir` (a prefix followed by '/'). Missing (or not a directory): nothing
// under it resolves. A directory whose listing lacks the next component of
// `dir`: that component does not exist, so nothing under it resolves either.
// An empty, "." or ".." component (always resolvable) or an unreadable
// listing proves nothing: the caller stats `dir`.
bool DirListings::Scope::known_missing(std::string_view dir) const {
  const std::pair<std::string, Listing>* nearest = nullptr;
  for (const auto& seen : m_stated) {
    const std::string& path = seen.first;
    if (dir.size() > path.size() && dir[path.size()] == '/' && dir.substr(0, path.size()) == path &&
        (nearest == nullptr || path.size() > nearest->first.size())) {
      nearest = &seen;
    }
  }
  if (nearest == nullptr) return false;
  const Listing& ancestor = nearest->second;
  if (!ancestor.is_dir) return true;
  std::string_view rest = dir.substr(nearest->first.size() + 1);
  std::string component(rest.substr(0, rest.find('/')));
  if (!ancestor.names || component.empty() || component == "." || component == "..") return false;
  return ancestor.names->count(component) == 0;
}

DirListings::Listing DirListings::list(const std::string& dir) {
  Listing out;
  std::optional<FileStat> st = stat_dir(dir);
  if (!st || !S_ISDIR(st->mode)) return out;
  out.is_dir = true;
  out.names = listing(dir, *st);
  return out;
}

std::optional<Digest> DirListings::names_digest(const std::string& dir) {
  std::optional<FileStat> st = stat_dir(dir);
  if (!st || !S_ISDIR(st->mode)) return std::nullopt;
  std::shared_ptr<const Names> names = listing(dir, *st);
  if (!names) return std::nullopt;
  std::vector<std::string> sorted;
  for (const std::string& n : *names) {
    if (n != "." && n != "..") sorted.push_back(n);
  }
  std::sort(sorted.begin(), sorted.end());
  Hasher h;
  h.add_field("ccpool-dir-names-v1");
  h.add_u64(sorted.size());
  for (const std::string& n : sorted) h.add_field(n);
  return h.digest();
}

}  // namespace ccpool::compiler
