// Answers of recorded lookups kept across requests (docs/cache-keys.md,
// "The validation memo"): a file's content, a path's type, real path or
// access answer, a directory's names, "no regular file here". A fact is
// served without a system call only while the kernel has reported nothing
// that could change it (inotify), so a repeated hit re-checks only what can
// have changed.
//
// The rule that makes a fact safe to keep:
// - every directory the path's resolution went through is watched (entries
//   created, deleted or moved; its own attributes, deletion or move), and so
//   is the file itself, by inode (written, truncated, attributes, moved,
//   deleted; and opened: see below). A change made through any name (a hard
//   link, a bind mount) is reported on the inode's watch;
// - the watches exist before the answer is read, and a fact is kept only if
//   no event arrived between the first watch and the read's end (a change in
//   that window, within one timestamp tick or not, refuses it);
// - writes through a shared mapping report nothing, but they need the file
//   open for writing: a file is kept only when a read lease can be taken on
//   it (F_SETLEASE fails while anyone holds it open for writing or mapped
//   writable), and any later open of it, by anyone, makes the next use take
//   that probe again before the fact is believed. A file we cannot probe (not
//   ours, no CAP_LEASE) is never kept;
// - only filesystems whose every change goes through this kernel's VFS are
//   watched (ext2/3/4, xfs, btrfs, tmpfs): on NFS, FUSE, overlayfs and the
//   rest a change can happen without an event, so their paths are validated
//   on every request, as without the memo;
// - no fact depends on a watch before an event of it arrived: each new
//   watch is followed by the memo's own open of its inode, whose IN_OPEN
//   must come back (an inotify instance that reports nothing keeps nothing);
// - a lost event (queue overflow) or a change of the mount table
//   (/proc/self/mountinfo) forgets everything.
// Used only for requesters in the service's own mount namespace and root
// (in_own_view()).
//
// Thread-safe: one lock orders every call; learning holds it while it reads.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/hash.h"

namespace ccpool::compiler {

class DirListings;

class ValidationMemo {
 public:
  struct Options {
    // Whether inotify reports every change on a filesystem of this statfs
    // f_type; null: the built-in list.
    std::function<bool(int64_t fs_type)> reports_events;
    // Test seams: events are read and dropped (a filesystem that reports
    // nothing); a hook that runs after a file's watches exist and its
    // content was read, before the fact is kept.
    bool drop_events = false;
    std::function<void(const std::string& path)> after_read;
    // Takes a read lease on `fd` (given back at once with F_UNLCK): 0, or
    // the errno of the refusal; null: fcntl(F_SETLEASE). A seam for the
    // refusal a service that is not root meets on files it does not own.
    std::function<int(int fd)> read_lease;
    // The most inotify watches the memo holds (they come out of the user's
    // own fs.inotify.max_user_watches, shared with editors and IDEs); past
    // it nothing new is kept. 0: a quarter of that limit, at most 65536.
    size_t max_watches = 0;
    // Learning costs a fresh read of every file and new watches, so what one
    // use (a manifest entry) validated in full on a hit is learned only when
    // that use comes for the n-th time: the first warm rebuild after a
    // service restart, one hit per object, learns nothing and pays nothing;
    // a result hit again (ranks compiling the same kernel, a rebuild after
    // `make clean`) is learned on its second hit. 1: learn on first use.
    // A miss's own record is kept at once (learn_now).
    unsigned learn_at_use = 2;
  };

  // nullptr when inotify is not available (then every lookup validates).
  static std::unique_ptr<ValidationMemo> create(Options options);
  ~ValidationMemo();
  ValidationMemo(const ValidationMemo&) = delete;
  ValidationMemo& operator=(const ValidationMemo&) = delete;

  // Whether the calling thread sees the files as the memo's creator did: the
  // same mount namespace and the same root directory. Two stat(2) calls.
  bool in_own_view() const;

  // Reads what the kernel reported since the last call (one epoll_wait when
  // nothing did). Call at the start of every validation: a change made
  // before the request was sent is queued by then.
  void sync();

  // The content digest of the regular file `abs` resolves to, if kept and
  // still valid.
  std::optional<Digest> content(const std::string& abs);
  // The same for a thread that must not wait (compiler/bounded.h): sync()
  // first, and nullopt also when another thread holds the memo.
  std::optional<Digest> content_if_free(const std::string& abs);
  // Another answer (kind as in ManifestCheck, 'n' for "no regular file and
  // no entry", 'd' for a directory's names), if kept and still valid.
  std::optional<std::string> answer(char kind, const std::string& abs,
                                    const std::string& extra = "");
  // Whether the kept answer equals `want`; nullopt when none is kept and
  // valid. Compares under the lock: nothing is copied.
  std::optional<bool> answer_is(char kind, const std::string& abs, const std::string& extra,
                                std::string_view want);

  // A number that moves whenever an answer kept here could stop being served
  // as it was: an event that moves the epoch (anything but an open), an open
  // of a kept file by someone else, a fact kept or forgotten, a reset. Read
  // it before asking the questions it is to vouch for.
  uint64_t generation() const;
  // `asked` names a set of questions (the caller's: a manifest entry in a
  // cwd). note_served(): every one of them was served by the memo, and
  // `generation` was read before the first. unchanged_since_served(): the
  // generation has not moved since then, so they would all be served again
  // with the same answers; call sync() first. Kept for at most kMaxFacts sets.
  void note_served(const std::string& asked, uint64_t generation);
  bool unchanged_since_served(const std::string& asked);
  // For a thread that must not wait (compiler/bounded.h): sync() then
  // unchanged_since_served(), or nullopt when another thread holds the memo
  // (a lesson being learned reads every header under its lock).
  std::optional<bool> unchanged_since_served_if_free(const std::string& asked);

  // What to learn, read again after the watches exist. For 'f' the memo
  // reads the file itself; for the others `compute` gives the answer.
  struct Item {
    char kind = 'f';
    std::string abs;
    std::string extra;                     // part of the key ('a': the mode; 'n': the names)
    bool follow_last = true;               // the last component is resolved through a link
    std::vector<std::string> names;        // 'n': the names that must not be regular files or exist
    std::function<std::string()> compute;  // not 'f'
  };
  // `use`: what these items were validated for (the caller's manifest
  // entry); they are learned on its learn_at_use-th time. Every call counts
  // one time of `use`, with or without items.
  void learn(const std::vector<Item>& items, DirListings& listings, const std::string& use);
  // Whether the next learn() for `use` keeps its items: a caller collects
  // them only then (building the list costs a copy of every path).
  bool learns_next(const std::string& use) const;
  // Keeps the items now, whatever their use: what a compile just recorded
  // (a miss), whose run costs far more than reading its inputs once more,
  // so that the tree's first warm rebuild is served from the memo.
  void learn_now(const std::vector<Item>& items, DirListings& listings);

  struct Counters {
    uint64_t served = 0;   // facts served without a system call of their own
    uint64_t learned = 0;  // facts kept
    uint64_t refused =
        0;  // facts not kept (a change while learning, a writer, an unwatched filesystem)
    uint64_t probes = 0;  // writer probes of files opened since they were learned
    // facts served after a walk of what they depend on: something was
    // reported since they were last found valid
    uint64_t rechecked = 0;
    // sets of questions answered at once by unchanged_since_served()
    uint64_t sets_served = 0;
    uint64_t deferred = 0;  // times of a use that learned nothing: fewer than learn_at_use
    uint64_t resets = 0;    // everything forgotten (overflow, mount table)
    uint64_t watches = 0;   // inotify watches held
  };
  Counters counters() const;

  struct State;

 private:
  explicit ValidationMemo(std::unique_ptr<State> state);
  std::unique_ptr<State> m_state;
};

}  // namespace ccpool::compiler
