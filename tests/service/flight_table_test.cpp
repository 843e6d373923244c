// FlightTable: who leads, who joins, and what happens when waiters leave.
// These fail in milliseconds where the end-to-end suites only hang.
#include "service/flight_table.h"

#include <gtest/gtest.h>

#include <string>

namespace ccpool::service {
namespace {

Digest key_of(uint64_t n) {
  return hash_bytes(std::to_string(n));
}

std::shared_ptr<Flight> candidate(uint64_t key) {
  auto f = std::make_shared<Flight>();
  f->key = key_of(key);
  f->program = "/usr/bin/true";
  f->work_dir = "/nonexistent/j" + std::to_string(key);
  return f;
}

Waiter waiter(uint64_t conn) {
  Waiter w;
  w.conn_id = conn;
  w.client_pid = static_cast<pid_t>(1000 + conn);
  return w;
}

TEST(FlightTable, FirstLeadsAndIdenticalJoins) {
  FlightTable table;
  auto a = table.join_or_lead(candidate(1), true, waiter(1));
  auto b = table.join_or_lead(candidate(1), true, waiter(2));
  ASSERT_TRUE(a.leader);
  EXPECT_FALSE(b.leader);
  EXPECT_EQ(a.flight, b.flight);
  EXPECT_TRUE(a.flight->shared);
  EXPECT_EQ(a.flight->program, "/usr/bin/true");  // published fully built
  EXPECT_EQ(table.size(), 1u);
  auto waiters = table.complete(a.flight);
  ASSERT_EQ(waiters.size(), 2u);
  EXPECT_TRUE(waiters[0].leader);
  EXPECT_FALSE(waiters[1].leader);
  EXPECT_EQ(waiters[1].conn_id, 2u);
  EXPECT_EQ(table.size(), 0u);
}

TEST(FlightTable, DifferentKeysLeadSeparately) {
  FlightTable table;
  auto a = table.join_or_lead(candidate(1), true, waiter(1));
  auto b = table.join_or_lead(candidate(2), true, waiter(2));
  EXPECT_TRUE(a.leader);
  EXPECT_TRUE(b.leader);
  EXPECT_NE(a.flight->id, b.flight->id);
}

TEST(FlightTable, UnshareableIsNeverJoinedAndDoesNotHideTheShared) {
  FlightTable table;
  auto shared = table.join_or_lead(candidate(1), true, waiter(1));
  auto own = table.join_or_lead(candidate(1), false, waiter(2));
  EXPECT_TRUE(own.leader);
  EXPECT_FALSE(own.flight->shared);
  EXPECT_NE(own.flight, shared.flight);
  auto third = table.join_or_lead(candidate(1), true, waiter(3));
  EXPECT_FALSE(third.leader);
  EXPECT_EQ(third.flight, shared.flight);
  auto lone = table.join_or_lead(candidate(7), false, waiter(4));
  auto after = table.join_or_lead(candidate(7), true, waiter(5));
  EXPECT_TRUE(after.leader);
  EXPECT_NE(after.flight, lone.flight);
}

TEST(FlightTable, CompletedFlightIsNotJoined) {
  FlightTable table;
  auto a = table.join_or_lead(candidate(1), true, waiter(1));
  table.complete(a.flight);
  auto b = table.join_or_lead(candidate(1), true, waiter(2));
  EXPECT_TRUE(b.leader);
  EXPECT_NE(a.flight, b.flight);
}

TEST(FlightTable, CancelledOnlyWhenEveryWaiterLeaves) {
  FlightTable table;
  auto a = table.join_or_lead(candidate(1), true, waiter(1));
  table.join_or_lead(candidate(1), true, waiter(2));
  EXPECT_TRUE(table.remove_connection(1).empty());  // one waiter left
  EXPECT_FALSE(table.is_cancelled(a.flight));
  auto orphaned = table.remove_connection(2);
  ASSERT_EQ(orphaned.size(), 1u);
  EXPECT_EQ(orphaned[0], a.flight);
  EXPECT_TRUE(table.is_cancelled(a.flight));
  EXPECT_FALSE(table.set_job(a.flight, 5));  // must not (or no longer) run
  // A cancelled flight is not joined: the next identical request leads anew.
  auto c = table.join_or_lead(candidate(1), true, waiter(3));
  EXPECT_TRUE(c.leader);
  EXPECT_NE(c.flight, a.flight);
}

TEST(FlightTable, LeaderClientPidFollowsTheFirstWaiter) {
  FlightTable table;
  auto a = table.join_or_lead(candidate(1), true, waiter(1));
  table.join_or_lead(candidate(1), true, waiter(2));
  EXPECT_EQ(table.leader_client_pid(a.flight->id), 1001);
  table.remove_connection(1);
  EXPECT_EQ(table.leader_client_pid(a.flight->id), 1002);
  EXPECT_TRUE(table.set_running(a.flight, 4242));
  EXPECT_EQ(a.flight->pid.load(), 4242);
}

}  // namespace
}  // namespace ccpool::service
