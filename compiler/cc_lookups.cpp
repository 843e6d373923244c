#include "compiler/cc_lookups.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <utility>

namespace ccpool::compiler {
namespace {

bool list_directory(const std::string& dir, std::vector<std::string>& out) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return false;
  while (struct dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") out.push_back(std::move(name));
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return true;
}

}  // namespace

std::string join_dir(const std::string& dir, const std::string& name) {
  if (dir.empty() || (!name.empty() && name[0] == '/')) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

std::string dir_of(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return "";
  return slash == 0 ? "/" : path.substr(0, slash);
}

bool has_prefix_dir(const std::string& path, const std::string& dir) {
  if (dir.empty()) return false;
  if (dir == "/") return path.size() > 1 && path[0] == '/';
  return path.size() > dir.size() + 1 && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/';
}

LookupRecorder::LookupRecorder(FileHasher& hasher, DirListings& listings, std::string cwd, int64_t start_ns)
    : m_hasher(hasher), m_listings(listings), m_cwd(std::move(cwd)), m_start_ns(start_ns) {}

std::string LookupRecorder::resolve(const std::string& path) const {
  if (!path.empty() && path[0] == '/') return path;
  if (m_cwd.empty()) return path;
  return m_cwd.back() == '/' ? m_cwd + path : m_cwd + "/" + path;
}

LookupRecorder::Kind LookupRecorder::kind_of(const std::string& path) {
  auto it = m_kinds.find(path);
  if (it != m_kinds.end()) return it->second;
  // Most candidates do not exist: the parent's listing (memoized per
  // directory, as at lookup time) answers those without a stat(2).
  std::string parent = dir_of(path);
  std::string name = path.substr(parent.empty() ? 0 : parent == "/" ? 1 : parent.size() + 1);
  auto dir = m_dirs.find(parent);
  if (dir == m_dirs.end()) dir = m_dirs.emplace(parent, m_listings.list(resolve(parent.empty() ? "." : parent))).first;
  if (!dir->second.is_dir ||
      (dir->second.names && name != "." && name != ".." && !name.empty() && !dir->second.names->count(name))) {
    m_kinds.emplace(path, Kind::kAbsent);
    return Kind::kAbsent;
  }
  std::optional<FileStat> st = stat_path(resolve(path));
  Kind kind = !st ? Kind::kAbsent
              : S_ISREG(st->mode) ? Kind::kRegular
              : S_ISDIR(st->mode) ? Kind::kDirectory
                                  : Kind::kOther;
  m_kinds.emplace(path, kind);
  return kind;
}

std::string LookupRecorder::add_file(const std::string& path) {
  if (m_record.files.count(path)) return "";
  Result<HashedFile> f = m_hasher.hash(resolve(path));
  if (!f) return "input_unreadable: " + f.error().message;
  if (f->stat.mtime_ns >= m_start_ns || f->stat.ctime_ns >= m_start_ns) {
    return "input_changed_during_compile: '" + path + "' was modified during the compile";
  }
  m_record.files.emplace(path, f->content);
  return "";
}

std::string LookupRecorder::pch_candidate(const std::string& path) {
  switch (kind_of(path)) {
    case Kind::kAbsent:
      m_record.absent.insert(path);
      return "";
    case Kind::kRegular:
      return add_file(path);
    case Kind::kOther:
      return "pch_unsupported: '" + path + "' is neither a file nor a directory";
    case Kind::kDirectory:
      break;
  }
  // gcc tries every file of a NAME.gch/ directory: its names and each file.
  if (m_record.dirs.count(path)) return "";
  std::optional<FileStat> st = stat_path(resolve(path));
  if (!st || st->mtime_ns >= m_start_ns || st->ctime_ns >= m_start_ns) {
    return "input_changed_during_compile: '" + path + "' changed during the compile";
  }
  std::optional<Digest> names = m_listings.names_digest(resolve(path));
  std::vector<std::string> entries;
  if (!names || !list_directory(resolve(path), entries)) {
    return "pch_unsupported: cannot read the PCH directory '" + path + "'";
  }
  for (const std::string& e : entries) {
    std::string file = join_dir(path, e);
    if (kind_of(file) != Kind::kRegular) return "pch_unsupported: '" + file + "' is not a regular file";
    if (std::string why = add_file(file); !why.empty()) return why;
  }
  std::optional<Digest> again = m_listings.names_digest(resolve(path));
  if (!again || *again != *names) return "input_changed_during_compile: '" + path + "' changed while read";
  m_record.dirs.emplace(path, *names);
  return "";
}

std::string LookupRecorder::no_pch_in(const std::vector<std::string>& dirs) {
  for (const std::string& dir : dirs) {
    DirListings::Listing listing = m_listings.list(resolve(dir.empty() ? "." : dir));
    if (!listing.is_dir) continue;
    if (!listing.names) return "pch_unsupported: cannot list '" + dir + "' for precompiled headers";
    for (const std::string& name : *listing.names) {
      if (name.size() > 4 && name.compare(name.size() - 4, 4, ".gch") == 0) {
        return "pch_unsupported: '" + join_dir(dir, name) +
               "' may stand for an include the scan cannot read (#include MACRO)";
      }
    }
  }
  return "";
}

std::string LookupRecorder::walk(const std::vector<std::string>& dirs, const std::string& name,
                                 const std::vector<std::string>& suffixes, bool keep_found) {
  for (const std::string& dir : dirs) {
    std::string candidate = join_dir(dir, name);
    for (const std::string& suffix : suffixes) {
      if (std::string why = pch_candidate(candidate + suffix); !why.empty()) return why;
    }
    switch (kind_of(candidate)) {
      case Kind::kRegular:
        return keep_found ? add_file(candidate) : "";
      case Kind::kOther:
        return "special_file: '" + candidate + "' is neither a file nor a directory";
      case Kind::kAbsent:
      case Kind::kDirectory:  // the compilers skip directories
        m_record.not_regular.insert(candidate);
        break;
    }
    if (!name.empty() && name[0] == '/') break;  // absolute: searched once
  }
  return "";
}

std::string LookupRecorder::pch_search(const std::vector<std::string>& dirs, const std::string& name,
                                       const std::vector<std::string>& suffixes) {
  return walk(dirs, name, suffixes, false);
}

std::string LookupRecorder::probe(const std::string& includer, const HasIncludeProbe& probe,
                                  const SearchOrder& order) {
  std::vector<std::string> chain = order.quote;
  chain.insert(chain.end(), order.bracket.begin(), order.bracket.end());
  if (!m_missing_known) {
    for (const std::string& d : chain) {
      if (kind_of(d) != Kind::kDirectory) m_missing_dirs.push_back(d);
    }
    m_missing_known = true;
  }
  std::vector<std::vector<std::string>> readings;
  if (probe.angle) {
    readings.push_back(order.bracket);
  } else {
    std::vector<std::string> with_includer = {dir_of(includer)};
    with_includer.insert(with_includer.end(), chain.begin(), chain.end());
    readings.push_back(std::move(with_includer));
    readings.push_back(chain);  // -I- : the includer's directory is not searched
  }
  if (probe.next) {
    // After the directory the includer was found in. It may be reachable
    // under several; found through its includer's directory, gcc continues
    // with the whole chain. Directories that did not exist were put first
    // in the reported order, so their real place is unknown: every reading
    // also checks them.
    readings.push_back(chain);
    for (size_t k = 0; k < chain.size(); ++k) {
      if (!has_prefix_dir(includer, chain[k])) continue;
      std::vector<std::string> rest(chain.begin() + static_cast<std::ptrdiff_t>(k + 1), chain.end());
      rest.insert(rest.end(), m_missing_dirs.begin(), m_missing_dirs.end());
      readings.push_back(std::move(rest));
    }
  }
  for (const std::vector<std::string>& dirs : readings) {
    if (std::string why = walk(dirs, probe.name, {}, true); !why.empty()) return why;
  }
  return "";
}

}  // namespace ccpool::compiler
