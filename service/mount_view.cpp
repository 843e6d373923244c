#include "service/mount_view.h"

#include <fcntl.h>
#include <sched.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace ccpool::service {
namespace {

// The service's own view, opened once; plain ints, never closed (a static
// with a destructor is not allowed in the service).
struct OwnView {
  int ns = -1, root = -1, cwd = -1;
  struct stat ns_st {
  }, root_st{};
  bool ok = false;
};

const OwnView& own_view() {
  static OwnView view;
  static std::once_flag once;
  std::call_once(once, [] {
    view.ns = ::open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
    view.root = ::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    view.cwd = ::open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    view.ok = view.ns >= 0 && view.root >= 0 && view.cwd >= 0 &&
              ::fstat(view.ns, &view.ns_st) == 0 && ::fstat(view.root, &view.root_st) == 0;
  });
  return view;
}

thread_local const MountView* t_current = nullptr;
thread_local bool t_unshared = false;

std::string errno_text(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

// Points the calling thread at `view` (nullptr: the service's own). "" or
// why not; `changed` says whether the thread's view was already altered.
std::string switch_to(const MountView* view, bool& changed) {
  changed = false;
  const OwnView& own = own_view();
  if (!own.ok) return "the service cannot open its own /proc/self/ns/mnt";
  if (!t_unshared) {
    if (::unshare(CLONE_FS) != 0) return errno_text("unshare(CLONE_FS)");
    t_unshared = true;
  }
  int ns = view ? view->ns_fd() : own.ns;
  int root = view ? view->root_fd() : own.root;
  if (::setns(ns, CLONE_NEWNS) != 0) {
    // EINVAL: a thread created while this one was in a view shares its
    // fs_struct; take a private copy again and retry once.
    if (errno != EINVAL || ::unshare(CLONE_FS) != 0 || ::setns(ns, CLONE_NEWNS) != 0) {
      return errno_text("setns(CLONE_NEWNS)");
    }
  }
  changed = true;
  if (::fchdir(root) != 0 || ::chroot(".") != 0)
    return errno_text("chroot into the requester's root");
  if (view ? ::chdir("/") != 0 : ::fchdir(own.cwd) != 0) return errno_text("chdir");
  return "";
}

}  // namespace

Result<std::shared_ptr<const MountView>> MountView::of_peer(pid_t pid) {
  const OwnView& own = own_view();
  if (pid <= 0) {
    return make_error(ErrorCode::kPermission,
                      "the client's pid is not visible to the service (another PID namespace): "
                      "run the service in the host's PID namespace (docs/deploy.md)");
  }
  std::string proc = "/proc/" + std::to_string(pid);
  // The common case, a requester in the service's own view, needs no
  // descriptor: stat(2) follows both links to what fstat(2) of an open one
  // would show (and decides at one instant, as the opens below do).
  struct stat ns_now {
  }, root_now{};
  if (own.ok && ::stat((proc + "/ns/mnt").c_str(), &ns_now) == 0 &&
      ::stat((proc + "/root").c_str(), &root_now) == 0 && ns_now.st_ino == own.ns_st.st_ino &&
      ns_now.st_dev == own.ns_st.st_dev && root_now.st_ino == own.root_st.st_ino &&
      root_now.st_dev == own.root_st.st_dev) {
    return std::shared_ptr<const MountView>();
  }
  UniqueFd ns(::open((proc + "/ns/mnt").c_str(), O_RDONLY | O_CLOEXEC));
  UniqueFd root(::open((proc + "/root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  struct stat ns_st {
  }, root_st{};
  if (!ns || !root || ::fstat(ns.get(), &ns_st) != 0 || ::fstat(root.get(), &root_st) != 0) {
    return make_error(ErrorCode::kPermission,
                      errno_text("cannot open " + proc + "/ns/mnt and " + proc + "/root") +
                          " (the service needs to see the client's /proc entries)");
  }
  if (!own.ok)
    return make_error(ErrorCode::kInternal, "the service cannot open its own /proc/self/ns/mnt");
  if (ns_st.st_ino == own.ns_st.st_ino && ns_st.st_dev == own.ns_st.st_dev &&
      root_st.st_ino == own.root_st.st_ino && root_st.st_dev == own.root_st.st_dev) {
    return std::shared_ptr<const MountView>();
  }
  std::string id = "mnt:" + std::to_string(ns_st.st_ino) +
                   " root:" + std::to_string(root_st.st_dev) + ":" + std::to_string(root_st.st_ino);
  auto view = std::make_shared<const MountView>(std::move(ns), std::move(root), std::move(id));
  // Try it now, so a service that may not enter answers "run it yourself"
  // before planning anything.
  InView probe(view.get());
  if (!probe.error().empty()) {
    return make_error(ErrorCode::kPermission,
                      "cannot enter the requester's mount namespace (" + probe.error() +
                          "): run the service with CAP_SYS_ADMIN and CAP_SYS_CHROOT "
                          "(docs/deploy.md) or compile in the same view");
  }
  return std::shared_ptr<const MountView>(std::move(view));
}

InView::InView(const MountView* view) : m_previous(t_current) {
  if (view == t_current) return;
  bool changed = false;
  m_error = switch_to(view, changed);
  if (!m_error.empty()) {
    // Half-way (namespace entered, chroot failed): back to where it was.
    bool back_changed = false;
    if (std::string back = changed ? switch_to(m_previous, back_changed) : ""; !back.empty()) {
      spdlog::critical("cannot return a thread to its view ({}); aborting", back);
      std::abort();
    }
    return;
  }
  t_current = view;
  m_switched = true;
}

InView::~InView() {
  if (!m_switched) return;
  bool changed = false;
  if (std::string back = switch_to(m_previous, changed); !back.empty()) {
    spdlog::critical("cannot return a thread to the service's view ({}); aborting", back);
    std::abort();
  }
  t_current = m_previous;
}

}  // namespace ccpool::service
