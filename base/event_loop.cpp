#include "base/event_loop.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace ccpool {
namespace {

Result<void> control(int epoll_fd, int op, int fd, uint32_t events, uint64_t tag) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = tag;
  if (::epoll_ctl(epoll_fd, op, fd, &ev) != 0) {
    return make_error(ErrorCode::kIo, std::string("epoll_ctl: ") + std::strerror(errno));
  }
  return ok();
}

}  // namespace

Result<std::unique_ptr<EventLoop>> EventLoop::create() {
  UniqueFd epoll_fd(::epoll_create1(EPOLL_CLOEXEC));
  UniqueFd wake_fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!epoll_fd || !wake_fd) {
    return make_error(ErrorCode::kIo, std::string("epoll/eventfd: ") + std::strerror(errno));
  }
  CCPOOL_TRY(control(epoll_fd.get(), EPOLL_CTL_ADD, wake_fd.get(), EPOLLIN, kWakeTag));
  return std::unique_ptr<EventLoop>(new EventLoop(std::move(epoll_fd), std::move(wake_fd)));
}

EventLoop::EventLoop(UniqueFd epoll_fd, UniqueFd wake_fd)
    : m_epoll_fd(std::move(epoll_fd)), m_wake_fd(std::move(wake_fd)) {}

Result<void> EventLoop::watch(int fd, uint32_t events, uint64_t tag) {
  return control(m_epoll_fd.get(), EPOLL_CTL_ADD, fd, events, tag);
}

Result<void> EventLoop::rewatch(int fd, uint32_t events, uint64_t tag) {
  return control(m_epoll_fd.get(), EPOLL_CTL_MOD, fd, events, tag);
}

void EventLoop::unwatch(int fd) {
  ::epoll_ctl(m_epoll_fd.get(), EPOLL_CTL_DEL, fd, nullptr);
}

void EventLoop::wake() {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(m_wake_fd.get(), &one, sizeof one);
}

Result<std::span<const EventLoop::Event>> EventLoop::wait(int timeout_ms) {
  epoll_event events[kMaxEvents];
  int n = ::epoll_wait(m_epoll_fd.get(), events, kMaxEvents, timeout_ms);
  if (n < 0 && errno == EINTR) return std::span<const Event>();
  if (n < 0) return make_error(ErrorCode::kIo, std::string("epoll_wait: ") + std::strerror(errno));
  for (int i = 0; i < n; ++i) {
    m_ready[i] = Event{events[i].data.u64, events[i].events};
    if (events[i].data.u64 == kWakeTag) {
      uint64_t count;
      [[maybe_unused]] ssize_t r = ::read(m_wake_fd.get(), &count, sizeof count);
    }
  }
  return std::span<const Event>(m_ready, static_cast<size_t>(n));
}

}  // namespace ccpool
