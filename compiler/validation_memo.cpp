#include "compiler/validation_memo.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <unordered_map>
#include <unordered_set>

#include "base/fs.h"
#include "base/thread_annotations.h"
#include "compiler/dir_listing.h"
#include "compiler/file_hasher.h"

namespace ccpool::compiler {
namespace {

// Directories: an entry created, deleted or moved (with its name), their own
// attributes (search permission), deletion, move, and opens (only the
// memo's own open matters: the echo that proves events arrive). Files, by
// inode: content, attributes, an open (by anyone, through any name), a
// writer's last close, deletion, move.
constexpr uint32_t kDirMask = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB |
                              IN_DELETE_SELF | IN_MOVE_SELF | IN_OPEN | IN_ONLYDIR | IN_DONT_FOLLOW;
constexpr uint32_t kFileMask = IN_MODIFY | IN_ATTRIB | IN_OPEN | IN_CLOSE_WRITE | IN_DELETE_SELF |
                               IN_MOVE_SELF | IN_DONT_FOLLOW;
constexpr uint32_t kEntryEvents = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO;
constexpr uint32_t kFileChanges =
    IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT;
constexpr size_t kMaxNamesPerDir = 4096;  // then any event in it invalidates everything through it
constexpr size_t kMaxFacts = 200000;
constexpr size_t kMaxWatches = 65536;
constexpr int kMaxLinks = 40;

// Filesystems where every change goes through this kernel's VFS, so inotify
// sees it. Not NFS/CIFS/FUSE/9p/ceph (another host or a daemon changes
// files), not overlayfs (its layers can change underneath it).
bool reports_every_change(int64_t type) {
  return type == EXT4_SUPER_MAGIC || type == XFS_SUPER_MAGIC || type == BTRFS_SUPER_MAGIC ||
         type == TMPFS_MAGIC;
}

std::vector<std::string> components(const std::string& path) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= path.size()) {
    size_t slash = path.find('/', i);
    if (slash == std::string::npos) slash = path.size();
    if (slash > i) out.push_back(path.substr(i, slash - i));
    i = slash + 1;
  }
  return out;
}

std::string join(const std::string& dir, const std::string& name) {
  return dir == "/" ? "/" + name : dir + "/" + name;
}

std::string parent_of(const std::string& dir) {
  size_t slash = dir.rfind('/');
  return slash == 0 || slash == std::string::npos ? "/" : dir.substr(0, slash);
}

std::string key_of(char kind, const std::string& abs, const std::string& extra) {
  std::string key(1, kind);
  key += '\0';
  key += abs;
  key += '\0';
  key += extra;
  return key;
}

// key_of() into this thread's buffer: a lookup asks for about a hundred
// facts per hit, and this keeps each question free of an allocation. Valid
// until the thread's next call.
const std::string& scratch_key(char kind, const std::string& abs, const std::string& extra) {
  thread_local std::string key;
  key.assign(1, kind);
  key += '\0';
  key += abs;
  key += '\0';
  key += extra;
  return key;
}

}  // namespace

// One watched inode. Epochs are those of the last event of each sort.
struct Node {
  int wd = -1;
  bool dir = false;
  bool dead = false;   // its watch is gone (IN_IGNORED): nothing through it is known
  bool fs_ok = false;  // on a filesystem that reports every change
  uint64_t dev = 0, ino = 0;
  uint64_t changed = 0;       // its own content, attributes, deletion, move
  uint64_t entries = 0;       // directories: any entry created, deleted or moved
  uint64_t named = 0;         // directories: the last event naming an entry (any of `names`)
  bool open_pending = false;  // files: opened by someone since the last writer probe
  uint32_t own_opens = 0;     // our own opens whose IN_OPEN is still to be read
  // files: a read lease was refused as not ours (EACCES/EPERM: another owner,
  // no CAP_LEASE). That holds until the owner or mode changes (IN_ATTRIB), so
  // until then learning it is refused without a probe.
  bool lease_denied = false;
  bool echoed = false;  // an event of this watch arrived: nothing depends on it before
  std::unordered_map<std::string, uint64_t> names;  // directories: the last event naming each entry
  // Directories: every entry name a walk looked up in it, noted before the
  // lookup (never forgotten until a reset); past kMaxNamesPerDir, all names.
  std::unordered_set<std::string> looked_up;
  bool looked_up_all = false;
};

// A kept answer and everything it depends on.
struct Fact {
  uint64_t stamp = 0;        // the epoch before its first watch was added
  uint64_t verified = 0;     // the epoch at which it was last found valid
  std::vector<Node*> nodes;  // every directory traversed, and the final inode if watched
  std::vector<std::pair<Node*, std::string>> names;  // every (directory, entry) looked up
  Node* content = nullptr;                           // 'f': probed for writers when opened since
  Node* listing = nullptr;                           // 'd': its entries are the answer
  std::string path;                                  // 'f': where to probe
  std::string answer;                                // not 'f'
  Digest digest;                                     // 'f'
};

struct ValidationMemo::State {
  Options options;
  FileStat mount_ns;      // /proc/thread-self/ns/mnt at creation
  FileStat root;          // "/" at creation
  int epoll_fd = -1;      // inotify_fd and mountinfo_fd; set at creation
  int mountinfo_fd = -1;  // set at creation
  Mutex mutex;
  int inotify_fd GUARDED_BY(mutex) = -1;
  uint64_t epoch GUARDED_BY(mutex) = 1;
  uint64_t generation GUARDED_BY(mutex) = 1;  // ValidationMemo::generation()
  // note_served(): the generation each set of questions was last served at.
  std::unordered_map<std::string, uint64_t> served_sets GUARDED_BY(mutex);
  uint64_t resets GUARDED_BY(mutex) = 0;
  std::unordered_map<int, std::unique_ptr<Node>> nodes GUARDED_BY(mutex);  // by watch descriptor
  std::vector<std::unique_ptr<Node>> gone GUARDED_BY(mutex);  // dead nodes facts may still point to
  std::unordered_map<std::string, Fact> facts GUARDED_BY(mutex);
  // Uses (manifest entries) whose facts are not learned yet: how many
  // requests validated them in full.
  std::unordered_map<std::string, unsigned> uses GUARDED_BY(mutex);
  // Content facts refused because the lease was denied as not ours, by key:
  // not tried again (no walk, no probe) while that node stays denied.
  std::unordered_map<std::string, Node*> denied GUARDED_BY(mutex);
  Node* last_denied GUARDED_BY(mutex) = nullptr;  // set by learn_one()
  Counters counters GUARDED_BY(mutex);

  // Whether a kept refusal says not to try `key` again yet.
  bool denied_now(const std::string& key) REQUIRES(mutex) {
    auto it = denied.find(key);
    if (it == denied.end()) return false;
    if (!it->second->dead && it->second->lease_denied) {
      ++counters.refused;
      return true;
    }
    denied.erase(it);
    return false;
  }

  // Whether this time of `use` is the one that learns its facts.
  bool ripe(const std::string& use) REQUIRES(mutex) {
    if (options.learn_at_use <= 1) return true;
    if (uses.size() >= kMaxFacts) uses.clear();  // bounded: forgetting only delays learning
    unsigned& n = uses[use];
    if (++n < options.learn_at_use) return false;
    uses.erase(use);
    return true;
  }

  ~State() {
    if (epoll_fd >= 0) ::close(epoll_fd);
    if (mountinfo_fd >= 0) ::close(mountinfo_fd);
    MutexLock lock(&mutex);
    if (inotify_fd >= 0) ::close(inotify_fd);
  }

  bool open_inotify() REQUIRES(mutex) {
    inotify_fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (inotify_fd < 0) return false;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = inotify_fd;
    return ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, inotify_fd, &ev) == 0;
  }

  // Forgets everything: closing the inotify descriptor drops every watch and
  // every queued event.
  void reset() REQUIRES(mutex) {
    if (inotify_fd >= 0) ::close(inotify_fd);
    inotify_fd = -1;
    facts.clear();
    denied.clear();  // points into nodes and gone
    nodes.clear();
    gone.clear();
    served_sets.clear();
    ++epoch;
    ++generation;
    ++resets;
    ++counters.resets;
    open_inotify();
  }

  void sync() REQUIRES(mutex) {
    if (inotify_fd < 0) return;
    if (nodes.size() > kMaxWatches || facts.size() > kMaxFacts || gone.size() > kMaxWatches) {
      reset();
      return;
    }
    epoll_event events[2];
    int n = ::epoll_wait(epoll_fd, events, 2, 0);
    bool readable = false;
    for (int i = 0; i < n; ++i) {
      if (events[i].data.fd == mountinfo_fd) {
        reset();  // a mount or unmount: a path may now name another filesystem
        return;
      }
      readable = true;
    }
    if (readable) drain();
  }

  void drain() REQUIRES(mutex) {
    alignas(inotify_event) char buf[64 * 1024];
    for (;;) {
      ssize_t len = ::read(inotify_fd, buf, sizeof buf);
      if (len <= 0) return;  // EAGAIN: all read
      if (options.drop_events) continue;
      for (ssize_t off = 0; off < len;) {
        const auto* e = reinterpret_cast<const inotify_event*>(buf + off);
        off += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
        if (e->mask & IN_Q_OVERFLOW) {
          reset();  // events were lost
          return;
        }
        apply(*e);
      }
    }
  }

  void apply(const inotify_event& e) REQUIRES(mutex) {
    auto it = nodes.find(e.wd);
    if (it == nodes.end()) return;
    Node& n = *it->second;
    n.echoed = true;
    if ((e.mask & ~IN_ISDIR) == IN_OPEN) {
      // An open changes no answer, so it does not move the epoch (every
      // fact would be checked in full again after each reader's open). A
      // file's open makes its next use probe for a writer (valid()); a
      // directory's, or a file's in it, changes nothing.
      if (n.dir && e.len > 0 && e.name[0] != '\0') return;
      if (n.own_opens > 0) {
        --n.own_opens;
      } else if (!n.dir) {
        n.open_pending = true;
        ++generation;
      }
      return;
    }
    // A named event that is not an entry's creation, deletion or move (a
    // chmod or touch of an entry, reported on its directory too) about a
    // name no walk ever looked up in this directory changes no kept answer:
    // what depends on that entry's own inode watches it, and a listing
    // depends on the names alone. It does not move the epoch, so the
    // facts stay verified without a walk (our own deliveries chmod and
    // touch outputs beside the sources on every hit).
    if (n.dir && e.len > 0 && e.name[0] != '\0' && !(e.mask & kEntryEvents) && !n.looked_up_all &&
        !n.looked_up.count(e.name)) {
      return;
    }
    ++epoch;
    ++generation;  // any kept answer may have moved
    if (e.mask & IN_IGNORED) {
      n.dead = true;
      gone.push_back(std::move(it->second));
      nodes.erase(it);
      return;
    }
    if (n.dir) {
      if (e.len > 0 && e.name[0] != '\0') {
        n.names[e.name] = epoch;
        n.named = epoch;
        if (e.mask & kEntryEvents) n.entries = epoch;
        if (n.names.size() > kMaxNamesPerDir) {
          n.changed = epoch;
          n.names.clear();
        }
      } else {
        n.changed = epoch;
      }
      return;
    }
    if (e.mask & IN_OPEN) n.open_pending = true;  // not alone: taken as someone else's
    if (e.mask & kFileChanges) n.changed = epoch;
    if (e.mask & IN_ATTRIB) n.lease_denied = false;
  }

  // The node of a watch on `path` (an existing real path whose lstat is
  // `st`), or null when it cannot be watched or is on a filesystem that may
  // change without an event.
  Node* watch(const std::string& path, const struct stat& st) REQUIRES(mutex) {
    bool dir = S_ISDIR(st.st_mode);
    if (!dir && !S_ISREG(st.st_mode))
      return nullptr;  // a device or FIFO: opening it may have effects
    int wd = ::inotify_add_watch(inotify_fd, path.c_str(), dir ? kDirMask : kFileMask);
    if (wd < 0) return nullptr;
    auto it = nodes.find(wd);
    if (it != nodes.end()) {
      Node* n = it->second.get();
      return n->dir == dir && n->fs_ok ? n : nullptr;
    }
    if (nodes.size() >= options.max_watches) {
      ::inotify_rm_watch(inotify_fd,
                         wd);  // a new one past the bound: the user's other programs need theirs
      return nullptr;
    }
    auto node = std::make_unique<Node>();
    node->wd = wd;
    node->dir = dir;
    node->dev = st.st_dev;
    node->ino = st.st_ino;
    struct statfs fs {};
    node->fs_ok = ::statfs(path.c_str(), &fs) == 0 &&
                  (options.reports_events ? options.reports_events(static_cast<int64_t>(fs.f_type))
                                          : reports_every_change(static_cast<int64_t>(fs.f_type)));
    Node* raw = node.get();
    nodes.emplace(wd, std::move(node));
    ++counters.watches;
    if (!raw->fs_ok) return nullptr;
    echo(raw, path);
    return raw;
  }

  // The canary: our own open of a new watch's inode must come back as an
  // event before anything depending on the watch is kept (learn() checks
  // Node::echoed). An inotify instance that reports nothing (the
  // drop_events seam) so keeps nothing, and every lookup validates.
  void echo(Node* node, const std::string& path) REQUIRES(mutex) {
    ++node->own_opens;
    int fd = ::open(path.c_str(),
                    O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (node->dir ? O_DIRECTORY : 0));
    if (fd < 0) {
      --node->own_opens;
      return;
    }
    ::close(fd);
  }

  // What one learning batch already resolved (valid within the batch: any
  // event after its start refuses what depends on it).
  struct WalkCache {
    std::unordered_map<std::string, Node*> dirs;         // real directory path -> its node
    std::unordered_map<std::string, std::string> links;  // real path of a link -> its target
  };

  // Resolves `abs` component by component as the kernel does, watching every
  // directory it goes through (before looking inside it) and, with
  // `watch_final`, the inode it ends at. Records every (directory, entry)
  // looked up. False: something on the way cannot be watched.
  bool walk(const std::string& abs, bool follow_last, bool watch_final, WalkCache& cache,
            Fact& fact, Node** final_node) REQUIRES(mutex) {
    if (abs.empty() || abs[0] != '/') return false;
    Node* dir = dir_node("/", cache);
    if (dir == nullptr) return false;
    fact.nodes.push_back(dir);
    std::string cur = "/";
    std::deque<std::string> rest;
    for (std::string& c : components(abs)) rest.push_back(std::move(c));
    int links = 0;
    while (!rest.empty()) {
      std::string c = std::move(rest.front());
      rest.pop_front();
      if (c == ".") continue;
      if (c == "..") {
        cur = parent_of(cur);
        dir = dir_node(cur, cache);
        if (dir == nullptr) return false;
        fact.nodes.push_back(dir);
        continue;
      }
      fact.names.emplace_back(dir, c);
      note_lookup(dir, c);  // before the lstat: an event about it from now on counts
      std::string next = join(cur, c);
      bool last = rest.empty();
      if (auto hit = cache.dirs.find(next); hit != cache.dirs.end()) {
        cur = next;
        dir = hit->second;
        fact.nodes.push_back(dir);
        if (last && final_node) *final_node = dir;
        continue;
      }
      std::string target;
      if (auto link = cache.links.find(next); link != cache.links.end()) {
        target = link->second;
      } else {
        struct stat st {};
        if (::lstat(next.c_str(), &st) != 0)
          return true;  // the resolution ends here (ENOENT, EACCES...)
        if (S_ISDIR(st.st_mode)) {
          Node* n = watch(next, st);
          if (n == nullptr) return false;
          cache.dirs.emplace(next, n);
          cur = next;
          dir = n;
          fact.nodes.push_back(dir);
          if (last && final_node) *final_node = dir;
          continue;
        }
        if (!S_ISLNK(st.st_mode)) {
          if (!last) return true;  // ENOTDIR
          if (watch_final) {
            Node* n = watch(next, st);
            if (n == nullptr) return false;
            fact.nodes.push_back(n);
            if (final_node) *final_node = n;
          }
          return true;
        }
        if (last && !follow_last)
          return true;  // a link's own entry: immutable, named in its directory
        char buf[4096];
        ssize_t len = ::readlink(next.c_str(), buf, sizeof buf);
        if (len <= 0 || static_cast<size_t>(len) >= sizeof buf) return false;
        target.assign(buf, static_cast<size_t>(len));
        cache.links.emplace(next, target);
      }
      if (last && !follow_last) return true;
      if (++links > kMaxLinks) return true;  // ELOOP
      std::vector<std::string> parts = components(target);
      rest.insert(rest.begin(), parts.begin(), parts.end());
      if (target[0] == '/') {
        cur = "/";
        dir = dir_node("/", cache);
        if (dir == nullptr) return false;
        fact.nodes.push_back(dir);
      }
    }
    return true;
  }

  static void note_lookup(Node* dir, const std::string& name) {
    if (dir->looked_up_all) return;
    if (dir->looked_up.size() >= kMaxNamesPerDir) {
      dir->looked_up_all = true;
      dir->looked_up.clear();
      return;
    }
    dir->looked_up.insert(name);
  }

  Node* dir_node(const std::string& real, WalkCache& cache) REQUIRES(mutex) {
    if (auto hit = cache.dirs.find(real); hit != cache.dirs.end()) return hit->second;
    struct stat st {};
    if (::lstat(real.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return nullptr;
    Node* n = watch(real, st);
    if (n != nullptr) cache.dirs.emplace(real, n);
    return n;
  }

  // Whether no event touched what `fact` depends on since `since`.
  static bool quiet(const Fact& fact, uint64_t since) {
    for (const Node* n : fact.nodes) {
      if (n->dead || !n->echoed || n->changed > since) return false;
    }
    for (const auto& [n, name] : fact.names) {
      if (n->dead || !n->echoed || n->changed > since) return false;
      if (n->named <= since)
        continue;  // no entry of it was named since: no need to look the name up
      auto it = n->names.find(name);
      if (it != n->names.end() && it->second > since) return false;
    }
    return !(fact.listing && fact.listing->entries > since);
  }

  // Opens `path` (expected to be `node`'s inode) and checks that nobody
  // holds it open for writing: a read lease is refused while anyone does
  // (a writable shared mapping keeps its file open). Our own open is not
  // mistaken for someone else's.
  bool no_writer(Node* node, const std::string& path, std::optional<FileStat>* opened_stat,
                 int* keep_fd) REQUIRES(mutex) {
    ++node->own_opens;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
      --node->own_opens;
      return false;
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_dev != node->dev ||
        st.st_ino != node->ino) {
      --node->own_opens;  // the open reached another inode: no event for this one
      ::close(fd);
      return false;
    }
    int refused = options.read_lease                      ? options.read_lease(fd)
                  : ::fcntl(fd, F_SETLEASE, F_RDLCK) == 0 ? 0
                                                          : errno;
    bool ok = refused == 0;
    if (ok) ::fcntl(fd, F_SETLEASE, F_UNLCK);
    if (refused == EACCES || refused == EPERM) node->lease_denied = true;
    if (opened_stat) *opened_stat = file_stat(st);
    if (ok && keep_fd) {
      *keep_fd = fd;
    } else {
      ::close(fd);
    }
    return ok;
  }

  bool valid(Fact& fact) REQUIRES(mutex) {
    // Nothing but opens was reported since, and not of this file.
    if (fact.verified == epoch && !(fact.content && fact.content->open_pending)) return true;
    ++counters.rechecked;
    if (!quiet(fact, fact.stamp)) return false;
    if (fact.content && fact.content->open_pending) {
      // Opened by someone since it was read: believed again only if nobody
      // holds it open for writing now, and nothing it reported meanwhile
      // (a writer's last close comes with IN_CLOSE_WRITE) changed it.
      ++counters.probes;
      Node* node = fact.content;
      if (!no_writer(node, fact.path, nullptr, nullptr)) return false;
      node->open_pending = false;
      uint64_t before = resets;
      sync();
      if (resets != before) return false;  // `fact` is gone
      if (node->open_pending || !quiet(fact, fact.stamp)) return false;
    }
    fact.verified = epoch;
    return true;
  }

  // The kept fact under `key` if it is still valid (counted as served);
  // an invalid one is forgotten.
  const Fact* find_valid(const std::string& key) REQUIRES(mutex) {
    auto it = facts.find(key);
    if (it == facts.end()) return nullptr;
    uint64_t before = resets;
    bool ok = valid(it->second);
    if (resets != before) return nullptr;  // everything, `it` included, is gone
    if (!ok) {
      facts.erase(it);
      ++generation;
      return nullptr;
    }
    ++counters.served;
    return &it->second;
  }

  // Reads every item afresh (watches first, then the answer) and keeps the
  // ones nothing was reported about meanwhile.
  void keep(const std::vector<Item>& items, DirListings& listings) REQUIRES(mutex) {
    if (items.empty()) return;
    sync();
    if (inotify_fd < 0) return;
    uint64_t stamp = epoch;
    uint64_t resets_before = resets;
    WalkCache cache;
    std::vector<std::pair<std::string, Fact>> learned;
    for (const Item& item : items) {
      std::string key = key_of(item.kind, item.abs, item.extra);
      if (denied_now(key)) continue;
      Fact fact;
      fact.stamp = stamp;
      last_denied = nullptr;
      if (learn_one(item, listings, cache, fact)) {
        learned.emplace_back(std::move(key), std::move(fact));
      } else {
        ++counters.refused;
        if (last_denied != nullptr && denied.size() < kMaxFacts) denied[key] = last_denied;
      }
    }
    // Whatever was reported while the answers were read refuses them.
    sync();
    if (resets != resets_before) return;
    for (auto& [key, fact] : learned) {
      if (!quiet(fact, stamp)) {
        ++counters.refused;
        continue;
      }
      fact.verified = 0;
      facts[key] = std::move(fact);
      ++generation;
      ++counters.learned;
    }
  }

  // Learns one item into `fact` (deps and answer); false: not kept.
  bool learn_one(const Item& item, DirListings& listings, WalkCache& cache, Fact& fact)
      REQUIRES(mutex) {
    Node* final_node = nullptr;
    bool watch_final = item.kind == 'f' || item.kind == 'a';
    if (!walk(item.abs, item.follow_last, watch_final, cache, fact, &final_node)) return false;
    switch (item.kind) {
      case 'f': {
        if (final_node == nullptr || final_node->dir) return false;
        std::optional<FileStat> st;
        int fd = -1;
        if (final_node->lease_denied || !no_writer(final_node, item.abs, &st, &fd)) {
          if (final_node->lease_denied) last_denied = final_node;
          return false;
        }
        final_node->open_pending = false;  // every open reported so far is covered by that probe
        Result<Digest> hashed = hash_descriptor(fd, item.abs);
        ::close(fd);
        if (!hashed) return false;
        fact.content = final_node;
        fact.path = item.abs;
        fact.digest = *hashed;
        break;
      }
      case 'n': {
        if (final_node !=
            nullptr) {  // the directory exists: its entries and what the present ones resolve to
          for (const std::string& name : item.names) {
            fact.names.emplace_back(final_node, name);
            note_lookup(final_node, name);  // before the listing is read
          }
          DirListings::Listing present = listings.list(item.abs);
          if (present.is_dir && !present.names)
            return false;  // unreadable: every path would need its stat
          if (present.names) {
            for (const std::string& name : item.names) {
              if (present.names->count(name) &&
                  !walk(join(item.abs, name), true, false, cache, fact, nullptr)) {
                return false;
              }
            }
          }
        }
        fact.answer = item.compute();
        break;
      }
      case 'd':
        fact.listing = final_node != nullptr && final_node->dir ? final_node : nullptr;
        fact.answer = item.compute();
        break;
      default:
        fact.answer = item.compute();
        break;
    }
    if (options.after_read) options.after_read(item.abs);
    return true;
  }
};

std::unique_ptr<ValidationMemo> ValidationMemo::create(Options options) {
  auto state = std::make_unique<State>();
  state->options = std::move(options);
  if (state->options.max_watches == 0) {
    size_t limit = 8192;  // the kernel's old default
    if (Result<std::string> text = read_file("/proc/sys/fs/inotify/max_user_watches")) {
      limit = static_cast<size_t>(std::strtoull(text->c_str(), nullptr, 10));
    }
    state->options.max_watches = std::min<size_t>(limit / 4, kMaxWatches);
  }
  state->epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  if (state->epoll_fd < 0) return nullptr;
  {
    MutexLock lock(&state->mutex);
    if (!state->open_inotify()) return nullptr;
  }
  // A mount table change is reported as EPOLLPRI on /proc/self/mountinfo.
  std::optional<FileStat> mount_ns = stat_path("/proc/thread-self/ns/mnt");
  std::optional<FileStat> root = stat_path("/");
  if (!mount_ns || !root) return nullptr;
  state->mount_ns = *mount_ns;
  state->root = *root;
  state->mountinfo_fd = ::open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
  if (state->mountinfo_fd < 0) return nullptr;
  epoll_event ev{};
  ev.events = EPOLLPRI;
  ev.data.fd = state->mountinfo_fd;
  if (::epoll_ctl(state->epoll_fd, EPOLL_CTL_ADD, state->mountinfo_fd, &ev) != 0) return nullptr;
  return std::unique_ptr<ValidationMemo>(new ValidationMemo(std::move(state)));
}

ValidationMemo::ValidationMemo(std::unique_ptr<State> state) : m_state(std::move(state)) {}

ValidationMemo::~ValidationMemo() = default;

bool ValidationMemo::in_own_view() const {
  std::optional<FileStat> mount_ns = stat_path("/proc/thread-self/ns/mnt");
  std::optional<FileStat> root = stat_path("/");
  return mount_ns && root && mount_ns->dev == m_state->mount_ns.dev &&
         mount_ns->ino == m_state->mount_ns.ino && root->dev == m_state->root.dev &&
         root->ino == m_state->root.ino;
}

void ValidationMemo::sync() {
  MutexLock lock(&m_state->mutex);
  m_state->sync();
}

std::optional<Digest> ValidationMemo::content(const std::string& abs) {
  MutexLock lock(&m_state->mutex);
  const Fact* fact = m_state->find_valid(scratch_key('f', abs, ""));
  return fact ? std::optional<Digest>(fact->digest) : std::nullopt;
}

std::optional<Digest> ValidationMemo::content_if_free(const std::string& abs) {
  State& s = *m_state;
  if (!s.mutex.try_lock()) return std::nullopt;
  s.sync();
  const Fact* fact = s.find_valid(scratch_key('f', abs, ""));
  std::optional<Digest> digest = fact ? std::optional<Digest>(fact->digest) : std::nullopt;
  s.mutex.unlock();
  return digest;
}

std::optional<std::string> ValidationMemo::answer(char kind, const std::string& abs,
                                                  const std::string& extra) {
  MutexLock lock(&m_state->mutex);
  const Fact* fact = m_state->find_valid(scratch_key(kind, abs, extra));
  return fact ? std::optional<std::string>(fact->answer) : std::nullopt;
}

std::optional<bool> ValidationMemo::answer_is(char kind, const std::string& abs,
                                              const std::string& extra, std::string_view want) {
  MutexLock lock(&m_state->mutex);
  const Fact* fact = m_state->find_valid(scratch_key(kind, abs, extra));
  return fact ? std::optional<bool>(fact->answer == want) : std::nullopt;
}

uint64_t ValidationMemo::generation() const {
  MutexLock lock(&m_state->mutex);
  return m_state->generation;
}

void ValidationMemo::note_served(const std::string& asked, uint64_t generation) {
  State& s = *m_state;
  MutexLock lock(&s.mutex);
  // A generation that moved while they were asked is kept too: it never
  // equals the current one again.
  if (s.served_sets.size() >= kMaxFacts) s.served_sets.clear();
  s.served_sets[asked] = generation;
}

bool ValidationMemo::unchanged_since_served(const std::string& asked) {
  State& s = *m_state;
  MutexLock lock(&s.mutex);
  auto it = s.served_sets.find(asked);
  if (it == s.served_sets.end() || it->second != s.generation) return false;
  ++s.counters.sets_served;
  return true;
}

std::optional<bool> ValidationMemo::unchanged_since_served_if_free(const std::string& asked) {
  State& s = *m_state;
  std::optional<bool> vouched;
  if (s.mutex.try_lock()) {
    s.sync();
    auto it = s.served_sets.find(asked);
    vouched = it != s.served_sets.end() && it->second == s.generation;
    if (*vouched) ++s.counters.sets_served;
    s.mutex.unlock();
  }
  return vouched;
}

bool ValidationMemo::learns_next(const std::string& use) const {
  State& s = *m_state;
  MutexLock lock(&s.mutex);
  if (s.options.learn_at_use <= 1) return true;
  auto it = s.uses.find(use);
  return (it == s.uses.end() ? 0 : it->second) + 1 >= s.options.learn_at_use;
}

void ValidationMemo::learn(const std::vector<Item>& items, DirListings& listings,
                           const std::string& use) {
  State& s = *m_state;
  MutexLock lock(&s.mutex);
  if (!s.ripe(use)) {
    ++s.counters.deferred;
    return;
  }
  s.keep(items, listings);
}

void ValidationMemo::learn_now(const std::vector<Item>& items, DirListings& listings) {
  State& s = *m_state;
  MutexLock lock(&s.mutex);
  s.keep(items, listings);
}

ValidationMemo::Counters ValidationMemo::counters() const {
  MutexLock lock(&m_state->mutex);
  Counters c = m_state->counters;
  c.watches = m_state->nodes.size();
  return c;
}

}  // namespace ccpool::compiler
