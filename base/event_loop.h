// One epoll set and one wake-up eventfd: what each listener thread waits on
// (the service's ConnectionHub, the Redis front's IoLoop, the MetricsServer).
// Level-triggered; each watched descriptor carries a caller-chosen 64-bit tag
// that wait() hands back. The loop owns no connection state and calls nothing
// back: its owner's thread reads the events and decides.
//
// Threads: wake() from any thread (async-signal-safe); everything else on the
// owner's thread. A descriptor must be unwatch()ed before it is closed, so a
// copy of it held elsewhere (a child between fork and exec) cannot keep
// reporting events.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "base/error.h"
#include "base/fs.h"

namespace ccpool {

class EventLoop {
 public:
  // The tag of the event wait() reports after wake(); never pass it to watch().
  static constexpr uint64_t kWakeTag = ~0ull;
  static constexpr int kMaxEvents = 64;  // per wait()

  struct Event {
    uint64_t tag;
    uint32_t events;  // EPOLLIN, EPOLLOUT, EPOLLHUP, ...
  };

  // Errors: kIo naming epoll or eventfd.
  static Result<std::unique_ptr<EventLoop>> create();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // EPOLL_CTL_ADD / EPOLL_CTL_MOD of `fd` with `events` (EPOLLIN | ...), reported as `tag`.
  // Errors: kIo naming epoll_ctl.
  Result<void> watch(int fd, uint32_t events, uint64_t tag);
  Result<void> rewatch(int fd, uint32_t events, uint64_t tag);
  void unwatch(int fd);

  // Any thread, async-signal-safe: the current or next wait() returns, with
  // one kWakeTag event for any number of wake() calls before it.
  void wake();

  // Waits up to timeout_ms (-1: until an event) and returns at most kMaxEvents
  // ready events, valid until the next wait(). Interrupted by a signal: no
  // events. Errors: kIo naming epoll_wait.
  Result<std::span<const Event>> wait(int timeout_ms);

 private:
  EventLoop(UniqueFd epoll_fd, UniqueFd wake_fd);

  UniqueFd m_epoll_fd;
  UniqueFd m_wake_fd;
  Event m_ready[kMaxEvents];
};

}  // namespace ccpool
