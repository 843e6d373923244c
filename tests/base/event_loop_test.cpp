#include "base/event_loop.h"

#include <gtest/gtest.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

namespace ccpool {
namespace {

std::vector<EventLoop::Event> wait_for(EventLoop& loop, int timeout_ms) {
  auto events = loop.wait(timeout_ms);
  EXPECT_TRUE(events) << events.error().message;
  if (!events) return {};
  return {events->begin(), events->end()};
}

TEST(EventLoop, ReportsTheTagOfAReadyDescriptor) {
  auto loop = EventLoop::create();
  ASSERT_TRUE(loop) << loop.error().message;
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  UniqueFd a(pair[0]), b(pair[1]);
  ASSERT_TRUE((*loop)->watch(a.get(), EPOLLIN, 7));
  EXPECT_TRUE(wait_for(**loop, 0).empty());

  ASSERT_EQ(::write(b.get(), "x", 1), 1);
  auto events = wait_for(**loop, 1000);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].tag, 7u);
  EXPECT_TRUE(events[0].events & EPOLLIN);
  EXPECT_EQ(wait_for(**loop, 0).size(), 1u);  // level-triggered: still unread

  ASSERT_TRUE((*loop)->rewatch(a.get(), EPOLLOUT, 8));
  events = wait_for(**loop, 1000);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].tag, 8u);
  EXPECT_TRUE(events[0].events & EPOLLOUT);

  (*loop)->unwatch(a.get());
  EXPECT_TRUE(wait_for(**loop, 0).empty());
  EXPECT_FALSE((*loop)->rewatch(a.get(), EPOLLIN, 7));  // no longer watched: kIo
}

TEST(EventLoop, WakeUpsBeforeAWaitComeBackAsOneEvent) {
  auto loop = EventLoop::create();
  ASSERT_TRUE(loop) << loop.error().message;
  (*loop)->wake();
  (*loop)->wake();
  auto events = wait_for(**loop, 1000);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].tag, EventLoop::kWakeTag);
  EXPECT_TRUE(wait_for(**loop, 0).empty());  // consumed
}

}  // namespace
}  // namespace ccpool
