// Several real processes on one store: concurrent writers and readers, writers
// whose maps are smaller than the data another process committed, and a
// writer killed with SIGKILL in the middle of its transactions.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "base/fs.h"
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

// A child whose stdin and stdout are pipes to this process.
struct Piped {
  pid_t pid = -1;
  FILE* to = nullptr;    // the child's stdin
  FILE* from = nullptr;  // the child's stdout
};

Piped spawn_piped(const std::vector<std::string>& args) {
  int in[2], out[2];
  Piped child;
  if (::pipe(in) != 0 || ::pipe(out) != 0) return child;
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  child.pid = ::fork();
  if (child.pid == 0) {
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    ::close(in[1]);
    ::close(out[0]);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  child.to = ::fdopen(in[1], "w");
  child.from = ::fdopen(out[0], "r");
  return child;
}

std::string read_line(FILE* from) {
  char line[512];
  if (!std::fgets(line, sizeof line, from)) return "<eof>";
  std::string s(line);
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
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
    pids.push_back(spawn(
        {worker, "write", dir, std::to_string(id), std::to_string(kCount), std::to_string(kSize)}));
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

// Contention long enough to lose writes on a store that turns a failed
// first page into MDB_BAD_TXN: in each round three writers with 256 KiB maps
// put 60 entries each, reading each back (so every put starts with a buffered
// touch), while another process commits one small value per transaction with
// a 64 MiB map and a read transaction held open, so the data grows past the
// writers' maps a few pages at a time. Every child must succeed and every
// entry must be there with its bytes.
TEST(MultiProcessTest, WritersOnSmallMapsLoseNothingWhileAnotherProcessGrowsTheData) {
  const std::string worker = ccpool::testing::build_binary("cache_store_worker");
  constexpr int kRounds = 32, kWriters = 3, kCount = 60;
  constexpr size_t kSize = 6000;
  int failed_children = 0, lost = 0;
  for (int round = 0; round < kRounds; ++round) {
    StoreOptions o = testing::options();
    o.dir += "-" + std::to_string(round);
    ASSERT_EQ(wait_exit(spawn({worker, "write", o.dir, "99", "1", "100"})),
              0);  // creates the store
    const std::string stop = o.dir + ".stop";
    pid_t creep = spawn({worker, "creep", o.dir, stop});
    std::vector<pid_t> writers;
    for (int id = 0; id < kWriters; ++id) {
      writers.push_back(spawn({worker, "write", o.dir, std::to_string(id), std::to_string(kCount),
                               std::to_string(kSize)}));
    }
    for (pid_t pid : writers) failed_children += wait_exit(pid) != 0;
    ASSERT_TRUE(write_file_atomic(stop, "", 0600));
    failed_children += wait_exit(creep) != 0;
    auto store = testing::open_store(o);
    ASSERT_TRUE(store);
    for (int id = 0; id < kWriters; ++id) {
      for (int i = 0; i < kCount; ++i) {
        auto got = store->peek(worker_key(id, i), true);
        lost +=
            !(got && *got && (*got)->outputs[0].data == worker_entry(id, i, kSize).outputs[0].data);
      }
    }
  }
  EXPECT_EQ(failed_children, 0);
  EXPECT_EQ(lost, 0) << "of " << kRounds * kWriters * kCount << " entries";
}

// The interleaving behind lost writes under contention: process A's map is
// smaller than the data another process B committed (B's map is larger), and
// A's next write transaction finds no free page, not even for the first page
// it touches. A's first write is then refused with MDB_MAP_FULL and LMDB
// leaves that transaction invalid: every later operation in it returns
// MDB_BAD_TXN. A must see the MDB_MAP_FULL, grow its map and write again.
// `touch`: the first write of A's put is a buffered LRU touch (a get before the
// put); `overwrite`: it removes the entry the put replaces.
void put_after_another_process_filled_the_map(const std::string& how) {
  const std::string worker = ccpool::testing::build_binary("cache_store_worker");
  const std::string dir = testing::options().dir;
  Piped probe = spawn_piped({worker, "probe", dir, how});
  ASSERT_GT(probe.pid, 0);
  uint64_t map = 0;
  ASSERT_EQ(std::sscanf(read_line(probe.from).c_str(), "map %llu",
                        reinterpret_cast<unsigned long long*>(&map)),
            1);
  ASSERT_EQ(map, 256u * 1024);
  Piped fill = spawn_piped({worker, "fill", dir, std::to_string(map / 4096)});
  ASSERT_GT(fill.pid, 0);
  uint64_t filled = 0;
  ASSERT_EQ(std::sscanf(read_line(fill.from).c_str(), "filled %llu",
                        reinterpret_cast<unsigned long long*>(&filled)),
            1);
  // Within two pages of the probe's map: no room for the first page it copies,
  // and not past its map (that would be MDB_MAP_RESIZED, handled at begin).
  ASSERT_GE(filled, map / 4096 - 2);
  ASSERT_LE(filled, map / 4096);
  std::fputs("go\n", probe.to);
  std::fflush(probe.to);
  EXPECT_EQ(read_line(probe.from), "put ok");
  EXPECT_EQ(wait_exit(probe.pid), 0);
  std::fclose(fill.to);  // the filler ends its read transaction and exits
  EXPECT_EQ(wait_exit(fill.pid), 0);
  std::fclose(probe.to);
  std::fclose(probe.from);
  std::fclose(fill.from);
  auto store = testing::open_store();
  ASSERT_TRUE(store);
  Digest key = worker_key(7, how == "touch" ? 1 : 0);
  auto got = store->get(key);
  ASSERT_TRUE(got && *got);
  EXPECT_TRUE((*got)->outputs[0].data ==
              worker_entry(7, how == "touch" ? 1 : 2, 2048).outputs[0].data);
  EXPECT_TRUE(store->verify(false)->corrupt.empty());
}

TEST(MultiProcessTest, PutWhoseTouchFindsTheMapFilledByAnotherProcessIsWritten) {
  put_after_another_process_filled_the_map("touch");
}

TEST(MultiProcessTest, OverwriteThatFindsTheMapFilledByAnotherProcessIsWritten) {
  put_after_another_process_filled_the_map("overwrite");
}

// Opening adopts a map another process grew, however many times it grows
// between our tries: here the grower passes the opener's map before each of
// its first three tries to begin the transaction that opens the tables.
TEST(MultiProcessTest, OpenAdoptsAMapGrownAgainWhileItAdopts) {
  const std::string worker = ccpool::testing::build_binary("cache_store_worker");
  const std::string dir = testing::options().dir;
  ASSERT_TRUE(testing::open_store());  // creates the store; closed again
  Piped grower = spawn_piped({worker, "grow", dir});
  ASSERT_GT(grower.pid, 0);
  uint64_t target = 256 * 1024;
  int tries = 0;
  std::vector<std::string> replies;
  auto grow_first_three = [&] {
    if (++tries > 3) return;
    std::fprintf(grower.to, "%llu\n", static_cast<unsigned long long>(target));
    std::fflush(grower.to);
    replies.push_back(read_line(grower.from));
    target *= 4;  // the next growth passes the map this try adopts (the grower's: 2 x target)
  };
  std::unique_ptr<lmdb::Env> env;
  EXPECT_EQ(lmdb::Env::open(dir, 256 * 1024, env, grow_first_three), 0);
  EXPECT_EQ(tries, 4);
  ASSERT_EQ(replies.size(), 3u);
  for (const std::string& reply : replies) EXPECT_EQ(reply.rfind("grown ", 0), 0u) << reply;
  std::fclose(grower.to);
  EXPECT_EQ(wait_exit(grower.pid), 0);
  std::fclose(grower.from);
  ASSERT_TRUE(env);
  EXPECT_GE(env->info().map_size, env->info().map_used);
}

// A process killed inside a read transaction leaves its reader slot in
// lock.mdb, and the pages its snapshot reaches can never be reused. Opening
// the store frees such slots, and so does every flush() (the service flushes
// every few seconds), so a later check finds none left. A live reader keeps
// the store open throughout: LMDB resets the whole reader table by itself
// only when the first process opens the environment.
TEST(MultiProcessTest, OpenAndFlushFreeTheReaderSlotsOfKilledProcesses) {
  const std::string worker = ccpool::testing::build_binary("cache_store_worker");
  const std::string dir = testing::options().dir;
  ASSERT_TRUE(testing::open_store());  // creates the store; closed again
  Piped live = spawn_piped({worker, "hold", dir});
  ASSERT_GT(live.pid, 0);
  ASSERT_EQ(read_line(live.from), "reading");
  auto kill_a_reader = [&] {
    Piped holder = spawn_piped({worker, "hold", dir});
    ASSERT_GT(holder.pid, 0);
    EXPECT_EQ(read_line(holder.from), "reading");
    ::kill(holder.pid, SIGKILL);
    EXPECT_EQ(wait_exit(holder.pid), 128 + SIGKILL);
    std::fclose(holder.to);
    std::fclose(holder.from);
  };
  kill_a_reader();
  auto store = testing::open_store();
  ASSERT_TRUE(store);
  EXPECT_EQ(*store->reader_check(), 0) << "open left the killed reader's slot";
  kill_a_reader();
  store->flush();
  EXPECT_EQ(*store->reader_check(), 0) << "flush() left the killed reader's slot";
  std::fclose(live.to);  // the live reader ends its transaction and exits
  EXPECT_EQ(wait_exit(live.pid), 0);
  std::fclose(live.from);
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
