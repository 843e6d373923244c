// A requester's own view of the filesystem, when it is not the service's:
// a container, a Slurm job with a private /tmp, a pod using the DaemonSet.
// Such a request is planned, looked up, run and delivered inside its view:
// the thread doing the work enters the requester's mount namespace and root
// (setns(2) after unshare(CLONE_FS), so no other thread is affected), and a
// tool it spawns starts there. Where the view cannot be entered (a service
// without CAP_SYS_ADMIN and CAP_SYS_CHROOT, a peer whose /proc entries
// cannot be opened) the request is answered "run it yourself" with the
// reason foreign_view_unavailable, and the client compiles locally.
// docs/deploy.md says what a DaemonSet needs.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "base/error.h"
#include "base/fs.h"

namespace ccpool::service {

class MountView {
 public:
  // nullptr when `pid` sees the service's own view (same mount namespace and
  // root); the view to enter otherwise; an error naming why it cannot be
  // entered.
  static Result<std::shared_ptr<const MountView>> of_peer(pid_t pid);

  // "mnt:<inode> root:<dev>:<inode>": equal ids are the same view.
  const std::string& id() const { return m_id; }
  int ns_fd() const { return m_ns.get(); }
  int root_fd() const { return m_root.get(); }

  MountView(UniqueFd ns, UniqueFd root, std::string id)
      : m_ns(std::move(ns)), m_root(std::move(root)), m_id(std::move(id)) {}
  MountView(const MountView&) = delete;
  MountView& operator=(const MountView&) = delete;

 private:
  UniqueFd m_ns;    // /proc/PID/ns/mnt
  UniqueFd m_root;  // /proc/PID/root (O_PATH)
  std::string m_id;
};

// RAII: the calling thread sees `view` (nullptr: the service's own view)
// until this is destroyed, then the view it saw before. Switching back can
// only fail if the kernel takes away what it granted a moment ago; then the
// process aborts rather than let a thread serve others from a foreign view.
class InView {
 public:
  explicit InView(const MountView* view);
  ~InView();
  InView(const InView&) = delete;
  InView& operator=(const InView&) = delete;
  // Empty when entered; else why not (the thread stayed where it was).
  const std::string& error() const { return m_error; }

 private:
  const MountView* m_previous;
  bool m_switched = false;
  std::string m_error;
};

}  // namespace ccpool::service
