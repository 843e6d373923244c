#include "compiler/observed.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <map>
#include <set>

#include "base/fs.h"
#include "base/process_facts.h"
#include "base/shim_env.h"
#include "compiler/dir_listing.h"
#include "compiler/path_names.h"
#include "compiler/subprocess.h"

namespace ccpool::compiler {
namespace {

bool under(const std::string& path, const std::string& dir) {
  return !dir.empty() && path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
         (path[dir.size()] == '/' || dir.back() == '/');
}

bool starts_with(const std::string& s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

// The run's own /proc entries and the character devices every tool opens
// answer the same for every run: not lookups. Other /proc and /sys files
// are host facts (CPU count, memory size) that size the tool's work, not its
// output (docs/cache-keys.md, "Not recorded").
bool not_a_lookup(const std::string& abs) {
  static const char* const kDevices[] = {"/dev/null", "/dev/zero",  "/dev/urandom", "/dev/random",
                                         "/dev/tty",  "/dev/stdin", "/dev/stdout",  "/dev/stderr"};
  for (const char* d : kDevices) {
    if (abs == d) return true;
  }
  return starts_with(abs, "/proc/") || abs == "/proc" || starts_with(abs, "/sys/") ||
         starts_with(abs, "/dev/fd/");
}

// "/tmp//x/" -> "/tmp/x" (nvcc forms "$TMPDIR/name" whatever TMPDIR ends with).
std::string squeezed(const std::string& path) {
  std::string out;
  for (char c : path) {
    if (c == '/' && !out.empty() && out.back() == '/') continue;
    out += c;
  }
  if (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

// nvcc's EDG front ends: they read the clock at startup, and expand
// __DATE__/__TIME__/__TIMESTAMP__ only where their input still holds one.
bool nvcc_front_end(const std::string& image) {
  std::string base = base_name(image);
  return base == "cudafe++" || base == "cicc";
}

// What an nvcc run must not do: ask the GPU (its answer is no file's).
bool asks_gpu(char op, const std::string& abs) {
  std::string base = base_name(abs);
  if (op == 'S' && base == "__nvcc_device_query") return true;
  if (base.rfind("libcuda.so", 0) == 0 || base.rfind("libnvidia-ml.so", 0) == 0) return true;
  return abs.rfind("/dev/", 0) == 0 && !not_a_lookup(abs);
}

bool absent_errno(int64_t e) {
  return e == ENOENT || e == ENOTDIR;
}

std::string err(int e) {
  return "e" + std::to_string(e);
}

// realpath(3) for one validation, memoized by path prefix: the headers of a
// compile share a few directories, and glibc's realpath lstat's and
// readlink's every component of every path. Here each distinct prefix is
// resolved once per validation (one lstat, and a readlink only for a link),
// with realpath's rules: "." dropped, ".." the resolved parent, a link's
// target resolved against the resolved parent, at most 40 links.
class RealPaths {
 public:
  explicit RealPaths(LinkStats* stats) : m_stats(stats) {}
  std::optional<std::string> of(const std::string& abs) {
    if (abs.empty() || abs[0] != '/') return std::nullopt;
    int links = 0;
    return resolve(abs, links);
  }

 private:
  std::optional<std::string> resolve(const std::string& path, int& links) {
    auto it = m_memo.find(path);
    if (it != m_memo.end()) return it->second;
    std::optional<std::string> out = resolve_uncached(path, links);
    m_memo.emplace(path, out);
    return out;
  }

  std::optional<std::string> resolve_uncached(const std::string& path, int& links) {
    size_t slash = path.find_last_of('/');
    std::string name = path.substr(slash + 1);
    std::string parent_path = slash == 0 ? "/" : path.substr(0, slash);
    if (path == "/") return std::string("/");
    std::optional<std::string> parent =
        parent_path == "/" ? std::optional<std::string>("/") : resolve(parent_path, links);
    if (!parent) return std::nullopt;
    if (name.empty() || name == ".") return parent;
    if (name == "..")
      return *parent == "/" ? "/" : parent->substr(0, std::max<size_t>(1, parent->rfind('/')));
    std::string joined = *parent == "/" ? "/" + name : *parent + "/" + name;
    uint32_t mode = 0;
    if (m_stats) {
      const std::optional<FileStat>& st = m_stats->of(joined);
      if (!st) return std::nullopt;
      mode = st->mode;
    } else {
      struct stat st {};
      if (::lstat(joined.c_str(), &st) != 0) return std::nullopt;
      mode = st.st_mode;
    }
    if (!S_ISLNK(mode)) return joined;
    if (++links > 40) return std::nullopt;
    char buf[PATH_MAX];
    ssize_t n = ::readlink(joined.c_str(), buf, sizeof buf);
    if (n <= 0) return std::nullopt;
    std::string target(buf, static_cast<size_t>(n));
    return resolve_uncached_target(target[0] == '/' ? target : *parent + "/" + target, links);
  }

  std::optional<std::string> resolve_uncached_target(const std::string& target, int& links) {
    // Not memoized under the link's name: the caller memoizes the link.
    std::string clean;
    for (size_t i = 0; i < target.size(); ++i) {
      if (target[i] == '/' && !clean.empty() && clean.back() == '/') continue;
      clean += target[i];
    }
    if (clean.size() > 1 && clean.back() == '/') clean.pop_back();
    return resolve(clean, links);
  }

  LinkStats* m_stats;
  std::map<std::string, std::optional<std::string>> m_memo;
};

// The answer a check's lookup gives right now; the same function at record
// time and at lookup time, so the two compare as strings.
std::string answer_now(char kind, const std::string& abs, const std::string& recorded,
                       const std::string& cwd, const std::vector<std::string>& env,
                       RealPaths* real = nullptr, LinkStats* link_stats = nullptr) {
  struct stat st {};
  switch (kind) {
    case 't':
      // Not a link: its lstat (shared with the other checks) is its stat.
      if (link_stats) {
        const std::optional<FileStat>& l = link_stats->of(abs);
        if (l && !S_ISLNK(l->mode)) return std::to_string((l->mode & S_IFMT) >> 12);
      }
      return ::stat(abs.c_str(), &st) == 0 ? std::to_string((st.st_mode & S_IFMT) >> 12)
                                           : err(errno);
    case 'l':
      if (link_stats) {
        const std::optional<FileStat>& l = link_stats->of(abs);
        if (l) return std::to_string((l->mode & S_IFMT) >> 12);
      }
      return ::lstat(abs.c_str(), &st) == 0 ? std::to_string((st.st_mode & S_IFMT) >> 12)
                                            : err(errno);
    case 'm':
      if (::stat(abs.c_str(), &st) != 0) return err(errno);
      return std::to_string(st.st_size) + ":" +
             std::to_string(int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec);
    case 'a': {
      int mode = std::atoi(recorded.c_str());
      return std::to_string(mode) + ":" +
             std::to_string(::access(abs.c_str(), mode) == 0 ? 0 : errno);
    }
    case 'r': {
      char buf[PATH_MAX];
      ssize_t n = ::readlink(abs.c_str(), buf, sizeof buf);
      return n < 0 ? err(errno) : "=" + std::string(buf, static_cast<size_t>(n));
    }
    case 'k': {
      if (real) {
        // A path it cannot resolve is answered by realpath(3) itself (the errno).
        if (std::optional<std::string> r = real->of(abs)) return "=" + *r;
      }
      char buf[PATH_MAX];
      return ::realpath(abs.c_str(), buf) ? "=" + std::string(buf) : err(errno);
    }
    case 'o': {
      int fd = ::open(abs.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
      if (fd < 0) return err(errno);
      ::close(fd);
      return "e0";
    }
    case 'g':
      return "=" + cwd;
    case 'e': {
      std::optional<std::string> v = env_value(env, abs);
      return v ? "=" + *v : "0";
    }
    case 'p': {  // does $PWD name the cwd (gcc then writes $PWD as DW_AT_comp_dir)
      std::optional<std::string> pwd = env_value(env, "PWD");
      struct stat a {
      }, b{};
      bool same = pwd && ::stat(pwd->c_str(), &a) == 0 && ::stat(cwd.c_str(), &b) == 0 &&
                  a.st_dev == b.st_dev && a.st_ino == b.st_ino;
      return same ? "1" : "0";
    }
    default:
      return "?";
  }
}

// Whether `path` of a check is a filesystem path (resolved against the cwd).
bool is_path_check(char kind) {
  return kind != 'e' && kind != 'g' && kind != 'p';
}

// "=<cwd>/rest" -> "=\x01/rest" (and "=<cwd>" -> "=\x01").
std::string mark_cwd(const std::string& answer, const std::string& cwd) {
  if (cwd.empty() || answer.empty() || answer[0] != '=') return answer;
  std::string value = answer.substr(1);
  if (value != cwd && !under(value, cwd)) return answer;
  std::string out = "=";
  out += kCwdMark;
  out.append(value, cwd.size(), std::string::npos);
  return out;
}

// `answer` with its cwd mark replaced by `cwd`: `answer` itself when it has
// none (no copy: validation asks this for every recorded check), else
// `scratch` filled.
const std::string& expand_cwd(const std::string& answer, const std::string& cwd,
                              std::string& scratch) {
  if (answer.size() < 2 || answer[0] != '=' || answer[1] != kCwdMark) return answer;
  scratch = "=";
  scratch += cwd;
  scratch.append(answer, 2, std::string::npos);
  return scratch;
}

struct Builder {
  FileHasher& hasher;
  DirListings& listings;
  const ObservedRun& run;
  std::map<std::string, Digest> files;
  std::vector<std::string> absent;  // as recorded: sorted and made unique once the record is read
  std::map<std::string, Digest> dirs;
  std::map<std::pair<char, std::string>, std::string> checks;  // (kind, path as recorded) -> answer
  std::map<std::string, std::string> recorded_paths;  // abs -> as recorded (first spelling)
  WhyNot why;

  bool refuse(std::string code, std::string text) {
    if (why.empty()) why = {std::move(code), std::move(text)};
    return false;
  }

  bool add_file(const std::string& path, const std::string& abs) {
    if (files.count(path)) return true;
    Result<HashedFile> f = hasher.hash(abs);
    if (!f) {
      if (f.error().code == ErrorCode::kUnsupported) {  // a directory or device opened for reading
        checks[{'t', path}] = answer_now('t', abs, "", run.cwd, run.env);
        return true;
      }
      return refuse("input_changed_during_compile",
                    "'" + abs + "' read by the run is gone: " + f.error().message);
    }
    if (f->stat.mtime_ns >= run.start_ns || f->stat.ctime_ns >= run.start_ns) {
      return refuse("input_changed_during_compile", "'" + abs + "' was modified during the run");
    }
    files.emplace(path, f->content);
    return true;
  }

  void add_check(char kind, const std::string& path, std::string answer) {
    checks.emplace(std::make_pair(kind, path), std::move(answer));
  }
};

}  // namespace

Observation conclude_observed(FileHasher& hasher, DirListings& listings, const ObservedRun& run,
                              const std::vector<TraceEvent>& events) {
  Observation out;
  Builder b{hasher, listings, run, {}, {}, {}, {}, {}, {}};
  std::map<int64_t, std::string> pending_exec;  // pid -> program it exec'd, until its image starts
  std::set<int64_t> pending_spawn;  // children spawned (their image may start before the P line)
  std::set<int64_t> images;         // processes whose image started traced
  std::set<int64_t> pcch_readers;   // processes that read a clang AST (PCH) file
  std::set<std::string> written;    // absolute paths the run wrote
  std::vector<std::string> written_dirs;  // directories it made (mkdtemp): all below is its own
  std::set<std::string> read_before_write;
  std::set<std::string> ignored(run.ignored_env.begin(), run.ignored_env.end());
  bool started = false;
  std::map<int64_t, std::string> image_of;  // pid -> its image (the last it exec'd)
  std::string front_end_clock;              // nvcc: a front end's clock read (its function)
  std::string scratch;                      // an event's absolute path (absolute_in)

  // Every path the run writes, first: an open for reading matters to the
  // read-then-written rule only when its path is among them (a handful; a
  // compile opens hundreds of files for reading).
  std::set<std::string> ever_written;
  for (const TraceEvent& e : events) {
    if (e.op == 'W') ever_written.insert(absolute_path(e.text, run.cwd));
  }

  // Pass 1: processes, writes, refusals.
  for (const TraceEvent& e : events) {
    switch (e.op) {
      case 'S':
        started = true;
        pending_exec.erase(e.pid);
        images.insert(e.pid);
        image_of[e.pid] = e.text;
        break;
      case 'X':
        pending_exec[e.pid] = e.text;
        break;
      case 'x':
        pending_exec.erase(e.pid);
        break;
      case 'P':
        if (e.a > 0) pending_spawn.insert(e.a);
        break;
      case 'W':
        written.insert(absolute_path(e.text, run.cwd));
        if (e.b & O_DIRECTORY) written_dirs.push_back(absolute_path(e.text, run.cwd));
        break;
      case 'O':
        if (e.a == 0 && !ever_written.empty()) {
          const std::string& abs = absolute_in(e.text, run.cwd, scratch);
          if (ever_written.count(abs) && !written.count(abs)) read_before_write.insert(abs);
        }
        break;
      case 'H':
        b.refuse("trace_chdir", "a process of the run changed its directory ('" + e.text + "')");
        break;
      case '?':
        b.refuse("trace_incomplete", "the record could not name a lookup (" + e.text + ")");
        break;
      case 'C':
        if (run.date_pinned && (e.text == "gmtime" || e.text == "gmtime_r")) break;
        if (run.nvcc && nvcc_front_end(image_of[e.pid])) {
          front_end_clock = image_of[e.pid] + ": " + e.text;  // decided once the files are known
          break;
        }
        b.refuse("time_macro",
                 "a process made a date from the clock (" + e.text +
                     "): __DATE__, __TIME__ or __TIMESTAMP__ without SOURCE_DATE_EPOCH pinning it");
        break;
      default:
        break;
    }
  }
  if (!started)
    b.refuse("untraced_process", "the tool ran without the recorder (static or setuid)");
  for (const auto& [pid, program] : pending_exec) {
    b.refuse("untraced_process",
             "'" + program + "' ran without the recorder (static, setuid or LD_PRELOAD dropped)");
  }
  for (int64_t child : images) pending_spawn.erase(child);
  if (!pending_spawn.empty())
    b.refuse("untraced_process", "a spawned process ran without the recorder");
  for (const std::string& w : written) {
    if (read_before_write.count(w) && !under(w, run.work_dir)) {
      b.refuse("input_overwritten", "'" + w + "' was read, then written by the run");
    }
  }
  if (!b.why.empty()) {
    out.why = b.why;
    return out;
  }

  // nvcc lists the directories it wrote its tmpxft_ files in, at exit, to
  // delete them: that listing is no lookup.
  std::set<std::string> nvcc_temp_dirs;
  if (run.nvcc) {
    for (const std::string& w : written) {
      if (base_name(w).rfind("tmpxft_", 0) == 0)
        nvcc_temp_dirs.insert(squeezed(w.substr(0, w.rfind('/'))));
    }
  }
  std::set<std::string> opened;  // nvcc: files the run opened (not images or libraries)
  auto skip = [&](const std::string& path, const std::string& abs) {
    for (const std::string& d : written_dirs) {
      if (under(abs, d)) return true;
    }
    return path.empty() || abs == run.work_dir || under(abs, run.work_dir) || written.count(abs) ||
           not_a_lookup(abs) ||
           (abs.size() >= 19 && abs.compare(abs.size() - 19, 19, "/libccpool-trace.so") == 0);
  };
  // Pass 2: what each lookup found.
  std::map<int64_t, std::vector<const TraceEvent*>> stats_by_pid;
  for (const TraceEvent& e : events) {
    if (e.op == 'E') {
      if (ignored.count(e.text)) continue;
      std::optional<std::string> value = env_value(run.env, e.text);
      bool from_requester = e.a ? (value && *value == e.text2) : !value;
      // A value another process of the run set (the driver's COLLECT_GCC...)
      // follows from what that process read.
      if (from_requester) b.add_check('e', e.text, e.a ? "=" + e.text2 : "0");
      continue;
    }
    if (e.op == 'G') {
      b.add_check('g', "", e.a ? err(static_cast<int>(e.a)) : "=" + e.text);
      continue;
    }
    if (e.op == 'C' || e.op == 'X' || e.op == 'W' || e.op == 'H' || e.op == '?') continue;
    const std::string& abs = absolute_in(e.text, run.cwd, scratch);
    if (run.nvcc && asks_gpu(e.op, abs)) {
      b.refuse("nvcc_asks_gpu",
               "the run asked the GPU ('" + e.text + "'): no file holds that answer");
      continue;
    }
    if (run.nvcc && e.op == 'D' && base_name(image_of[e.pid]) == "nvcc" &&
        nvcc_temp_dirs.count(squeezed(abs)))
      continue;
    if (skip(e.text, abs)) continue;
    bool ok = e.a == 0;
    switch (e.op) {
      case 'S':
      case 'L':
        b.add_file(e.text, abs);
        break;
      case 'O':
        if (ok && (e.b & O_DIRECTORY))
          b.add_check('t', e.text, answer_now('t', abs, "", run.cwd, run.env));
        else if (ok) {
          if (b.add_file(e.text, abs)) {
            if (run.nvcc && b.files.count(e.text)) opened.insert(e.text);
            std::string name = e.text;
            if (name.size() > 4 && (name.compare(name.size() - 4, 4, ".pch") == 0 ||
                                    name.compare(name.size() - 4, 4, ".gch") == 0)) {
              Result<std::string> head = read_file_head(abs, 4);  // not the whole PCH
              if (head && head->rfind("CPCH", 0) == 0) pcch_readers.insert(e.pid);
            }
          }
        } else if (absent_errno(e.a)) {
          b.absent.push_back(e.text);  // a failed open: checked by its directory's listing
        } else {
          b.add_check('o', e.text, err(static_cast<int>(e.a)));
        }
        break;
      case 'T': {
        bool nofollow = e.b >= 16;
        if (ok) {
          b.add_check(nofollow ? 'l' : 't', e.text, std::to_string(e.b & 15));
          if ((e.b & 15) == (S_IFREG >> 12)) stats_by_pid[e.pid].push_back(&e);
        } else if (absent_errno(e.a) && !nofollow) {
          b.absent.push_back(e.text);
        } else {
          b.add_check(nofollow ? 'l' : 't', e.text, err(static_cast<int>(e.a)));
        }
        break;
      }
      case 'A':
        if (absent_errno(e.a))
          b.absent.push_back(e.text);
        else
          b.add_check('a', e.text, std::to_string(e.b) + ":" + std::to_string(e.a));
        break;
      case 'x':
        if (absent_errno(e.a))
          b.absent.push_back(e.text);
        else
          b.add_check('a', e.text, std::to_string(X_OK) + ":" + std::to_string(e.a));
        break;
      case 'P':
        if (e.b != 0) {
          if (absent_errno(e.b))
            b.absent.push_back(e.text);
          else
            b.add_check('a', e.text, std::to_string(X_OK) + ":" + std::to_string(e.b));
        }
        break;
      case 'R':
        b.add_check('r', e.text, ok ? "=" + e.text2 : err(static_cast<int>(e.a)));
        break;
      case 'K':
        // realpath fails with ENOENT/ENOTDIR exactly when stat does: an
        // absent path (checked by directory listing, not a realpath each).
        if (absent_errno(e.a))
          b.absent.push_back(e.text);
        else
          b.add_check('k', e.text, ok ? "=" + e.text2 : err(static_cast<int>(e.a)));
        break;
      case 'D':
        if (ok) {
          std::optional<FileStat> st = stat_path(abs);
          std::optional<Digest> names = listings.names_digest(abs);
          if (!st || !names) {
            b.refuse("input_changed_during_compile",
                     "directory '" + abs + "' listed by the run is gone");
          } else if (st->mtime_ns >= run.start_ns || st->ctime_ns >= run.start_ns) {
            b.refuse("input_changed_during_compile",
                     "directory '" + abs + "' changed during the run");
          } else {
            b.dirs.emplace(e.text, *names);
          }
        } else if (absent_errno(e.a)) {
          b.absent.push_back(e.text);
        } else {
          b.add_check('o', e.text, err(static_cast<int>(e.a)));
        }
        break;
      default:
        break;
    }
  }
  // nvcc: a front end's clock reaches its output only through a date macro
  // left in its input, which gcc -E made from the files the run opened.
  if (!front_end_clock.empty()) {
    for (const std::string& path : opened) {
      std::string abs = absolute_path(path, run.cwd);
      Result<std::string> text = read_file(abs);
      if (!text || hash_bytes(*text) != b.files[path]) {
        b.refuse("input_changed_during_compile", "'" + abs + "' changed after the run");
        break;
      }
      for (const char* name : {"__DATE__", "__TIME__", "__TIMESTAMP__"}) {
        if (text->find(name) != std::string::npos) {
          b.refuse("time_macro", "'" + abs + "' names " + name + " and nvcc's front end (" +
                                     front_end_clock + ") reads the clock");
          break;
        }
      }
    }
  }
  // A clang that read a PCH checks the size and mtime of every input the
  // PCH names, and fails when one differs: keep them, so a touched header
  // misses and the rerun fails as the real compiler does.
  for (int64_t pid : pcch_readers) {
    for (const TraceEvent* e : stats_by_pid[pid]) {
      std::string abs = absolute_path(e->text, run.cwd);
      b.add_check('m', e->text, answer_now('m', abs, "", run.cwd, run.env));
    }
  }
  // Every recorded answer must still hold now, after the run: a lookup whose
  // answer changed meanwhile cannot say which answer the run got. The absent
  // paths are checked one parent directory at a time, as a hit checks them
  // (DirListings: one stat of each directory and its memoized listing, a
  // stat(2) only for a name it lists): a TU with a dozen -I directories looks
  // up thousands of absent paths in a few dozen directories.
  std::sort(b.absent.begin(), b.absent.end());
  b.absent.erase(std::unique(b.absent.begin(), b.absent.end()), b.absent.end());
  std::map<std::string, std::vector<std::string>> absent_by_dir;
  std::vector<std::string>* names_in =
      nullptr;  // the last path's directory (sorted: often the next's)
  std::string dir;
  for (const std::string& path : b.absent) {
    const std::string& abs = absolute_in(path, run.cwd, scratch);
    size_t slash = abs.rfind('/');
    if (slash == std::string::npos) {  // not absolute: cannot be listed
      struct stat st {};
      if (::stat(abs.c_str(), &st) == 0 || !absent_errno(errno))
        b.refuse("input_changed_during_compile", "'" + abs + "' appeared during the run");
      continue;
    }
    size_t dir_size = slash == 0 ? 1 : slash;
    if (names_in == nullptr || dir.size() != dir_size || abs.compare(0, dir_size, dir) != 0) {
      dir.assign(abs, 0, dir_size);
      names_in = &absent_by_dir[dir];
    }
    names_in->emplace_back(abs, slash + 1);
  }
  DirListings::Scope scope(listings);
  for (const auto& [dir, names] : absent_by_dir) {
    if (scope.check(dir, {}, names)) continue;
    std::string appeared = dir + "/...";  // named below unless it went away again
    for (const std::string& name : names) {
      std::string abs = (dir == "/" ? "" : dir) + "/" + name;
      struct stat st {};
      if (::stat(abs.c_str(), &st) == 0 || !absent_errno(errno)) {
        appeared = abs;
        break;
      }
    }
    b.refuse("input_changed_during_compile", "'" + appeared + "' appeared during the run");
    break;  // the first refusal is the one reported
  }
  // The checks are asked as a hit asks them: one lstat per path and one
  // resolution per path prefix, shared by this conclusion's checks.
  LinkStats link_stats;
  RealPaths real(&link_stats);
  const std::string regular = std::to_string(S_IFREG >> 12);
  std::map<std::pair<char, std::string>, std::string>& final_checks = b.checks;
  for (auto it = final_checks.begin(); it != final_checks.end();) {
    const auto& [kind, path] = it->first;
    const std::string& answer = it->second;
    // A regular file whose content is checked is a regular file: its stat
    // type needs no check of its own.
    if (kind == 't' && answer == regular && b.files.count(path)) {
      it = final_checks.erase(it);
      continue;
    }
    const std::string& abs = is_path_check(kind) ? absolute_in(path, run.cwd, scratch) : path;
    if (answer_now(kind, abs, answer, run.cwd, run.env, &real, &link_stats) != answer) {
      b.refuse("input_changed_during_compile",
               std::string("the answer for '") + path + "' (" + kind + ") changed during the run");
    }
    ++it;
  }
  if (std::optional<std::string> pwd = env_value(run.env, "PWD");
      pwd && final_checks.count({'e', "PWD"}) && final_checks[{'e', "PWD"}] != "0") {
    final_checks[{'p', "PWD"}] = answer_now('p', "PWD", "", run.cwd, run.env);
  }
  if (!b.why.empty()) {
    out.why = b.why;
    return out;
  }
  // Answers naming the cwd are kept relative to it when no output holds it.
  bool cwd_free = !run.cwd.empty() && run.cwd != "/";
  for (const std::string& text : run.output_texts) {
    if (cwd_free && text.find(run.cwd) != std::string::npos) cwd_free = false;
  }
  ManifestEntry& entry = out.entry;
  for (auto& [path, digest] : b.files) entry.files.emplace_back(path, digest);
  entry.absent = std::move(b.absent);
  for (auto& [path, digest] : b.dirs) entry.dirs.emplace_back(path, digest);
  for (auto& [key, answer] : final_checks) {
    std::string a = cwd_free && (key.first == 'k' || key.first == 'g' || key.first == 'e')
                        ? mark_cwd(answer, run.cwd)
                        : answer;
    entry.checks.push_back({key.first, key.second, std::move(a)});
  }
  if (entry.files.size() > kMaxManifestFiles || entry.checks.size() > kMaxManifestChecks) {
    out.why = {"too_many_inputs", "more than " + std::to_string(kMaxManifestFiles) + " files or " +
                                      std::to_string(kMaxManifestChecks) + " checks"};
  } else if (entry.absent.size() > kMaxManifestNegatives) {
    out.why = {"too_many_negatives",
               "more than " + std::to_string(kMaxManifestNegatives) + " absent paths"};
  }
  return out;
}

bool environment_holds(const ManifestEntry& entry, const ObservedView& view) {
  std::string scratch;
  for (const ManifestCheck& c : entry.checks) {
    if (c.kind != 'e' && c.kind != 'g') continue;
    if (answer_now(c.kind, c.path, c.answer, view.cwd, view.env) !=
        expand_cwd(c.answer, view.cwd, scratch))
      return false;
  }
  return true;
}

const std::optional<FileStat>& LinkStats::of(const std::string& abs) {
  auto it = m_memo.find(abs);
  if (it != m_memo.end()) return it->second;
  struct stat st {};
  std::optional<FileStat> out;
  if (::lstat(abs.c_str(), &st) == 0) out = file_stat(st);
  return m_memo.emplace(abs, out).first->second;
}

namespace {

// Answers that depend only on how a path resolves and on the final inode's
// type and permissions: what the validation memo's watches cover. Not 'm'
// (size and mtime), 'o' (an open's errno) or the environment's.
bool memoizable_check(char kind) {
  return kind == 't' || kind == 'l' || kind == 'k' || kind == 'r' || kind == 'a';
}

ValidationMemo::Item check_item(char kind, const std::string& abs, const std::string& recorded,
                                const std::string& cwd) {
  ValidationMemo::Item item;
  item.kind = kind;
  item.abs = abs;
  item.extra = kind == 'a' ? recorded : std::string();  // the mode asked
  item.follow_last = kind != 'l' && kind != 'r';
  // Asked again once the watches exist, without this lookup's shared stats.
  item.compute = [kind, abs, recorded, cwd] {
    return answer_now(kind, abs, recorded, cwd, std::vector<std::string>(), nullptr, nullptr);
  };
  return item;
}

}  // namespace

bool checks_hold(const ManifestEntry& entry, const ObservedView& view, DirListings& listings,
                 LinkStats* link_stats, ValidationMemo* memo,
                 std::vector<ValidationMemo::Item>* learn, bool* all_memo) {
  RealPaths real(link_stats);
  if (!environment_holds(entry, view)) return false;
  std::string abs_scratch, want_scratch;
  const std::string no_extra;
  for (const ManifestCheck& c : entry.checks) {
    if (c.kind == 'e' || c.kind == 'g') continue;
    const std::string& abs =
        is_path_check(c.kind) ? absolute_in(c.path, view.cwd, abs_scratch) : c.path;
    const std::string& want = expand_cwd(c.answer, view.cwd, want_scratch);
    bool kept = memo && memoizable_check(c.kind) && !abs.empty() && abs[0] == '/';
    if (kept) {
      if (std::optional<bool> same =
              memo->answer_is(c.kind, abs, c.kind == 'a' ? c.answer : no_extra, want)) {
        if (!*same) return false;
        continue;
      }
    }
    if (all_memo) *all_memo = false;  // asked with its own system call
    if (answer_now(c.kind, abs, c.answer, view.cwd, view.env, &real, link_stats) != want)
      return false;
    if (kept && learn) learn->push_back(check_item(c.kind, abs, c.answer, view.cwd));
  }
  for (const auto& [path, digest] : entry.dirs) {
    if (all_memo) *all_memo = false;  // a listing the memo does not keep
    std::optional<Digest> names = listings.names_digest(absolute_path(path, view.cwd));
    if (!names || *names != digest) return false;
  }
  return true;
}

}  // namespace ccpool::compiler
