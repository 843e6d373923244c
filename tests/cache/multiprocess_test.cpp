// Several real processes on one store: concurrent writers and readers, and a
// writer killed with SIGKILL in the middle of its transactions.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "tests/cache/store_fixture.h"
#include "tests/cache/worker_data.h"

namespace ccpool::cache {
namespace {

pid_t spawn(const std::vector<std::string>& args, int stdout_fd = -1) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    if (stdout_fd >= 0) ::dup2(stdout_fd, 1);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

int wait_exit(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(MultiProcessTest, FourWritersAndTwoReadersLoseNothing) {
  const std::string worker = ccpool::testing::build_binary("cache_store_worker");
  const std::string dir = testing::options().dir;
  constexpr int kWriters = 4, kCount = 60;
  constexpr size_t kSize = 24 * 1024;
  std::vector<pid_t> pids;
  for (int id = 0; id < kWriters; ++id) {
    pids.push_back(spawn({worker, "write", dir, std::to_string(id), std::to_string(kCount), std::to_string(kSize)}));
  }
  for (int r = 0; r < 2; ++r) {
    pids.push_back(spawn({worker, "read", dir, std::to_string(kWriters), std::to_string(kCount),
                          std::to_string(kSize), "400"}));
  }
  for (pid_t pid : pids) EXPECT_EQ(wait_exit(pid), 0) << "child " << pid;
  auto store = testing::open_store();
  ASSERT_TRUE(store);
  EXPECT_EQ(store->stats()->entries, static_cast<uint64_t>(kWriters * kCount));
  for (int id = 0; id < kWriters; ++id) {
    for (int i = 0; i < kCount; ++i) {
      auto got = store->get(worker_key(id, i));
      ASSERT_TRUE(got && *got) << id << "-" << i;
      EXPECT_EQ((*got)->outputs[0].data, worker_entry(id, i, kSize).outputs[0].data);
    }
  }
  EXPECT_TRUE(store->verify(false)->corrupt.empty());
  EXPECT_GT(store->stats()->map_size, 256u * 1024);  // it grew while shared
}

// Reads "committed N" lines until `want` were seen; returns the last N.
int read_committed(FILE* in, int want) {
  char line[64];
  int last = -1, seen = 0;
  while (seen < want && std::fgets(line, sizeof line, in)) {
    if (std::sscanf(line, "committed %d", &last) == 1) ++seen;
  }
  return last;
}

TEST(MultiProcessTest, KillNineMidTransactionKeepsCommittedEntries) {
  const std::string worker = ccpool::testing::build_binary("cache_store_worker");
  const std::string dir = testing::options().dir;
  int committed = -1;
  for (int round = 0; round < 4; ++round) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    pid_t pid = spawn({worker, "hammer", dir, std::to_string(256 * 1024 + round * 4096)}, fds[1]);
    ::close(fds[1]);
    FILE* in = ::fdopen(fds[0], "r");
    int last = read_committed(in, 5 + round * 3);
    // The child is inside put() (compressing or in its write txn) almost all the time.
    ::kill(pid, SIGKILL);
    EXPECT_EQ(wait_exit(pid), 128 + SIGKILL);
    std::fclose(in);
    ASSERT_GE(last, 0);
    committed = std::max(committed, last);
    auto store = testing::open_store();
    ASSERT_TRUE(store);
    EXPECT_GE(*store->reader_check(), 0);
    auto report = store->verify(false);
    ASSERT_TRUE(report) << report.error().message;
    EXPECT_TRUE(report->corrupt.empty());
    for (int i = 0; i <= last; ++i) {
      auto got = store->peek(worker_key(99, i), true);
      ASSERT_TRUE(got && *got) << "round " << round << " lost committed entry " << i;
    }
    // The store stays writable after the crash.
    EXPECT_TRUE(store->put(testing::test_key(1000 + round), testing::make_entry("x", 100)));
  }
}

}  // namespace
}  // namespace ccpool::cache
