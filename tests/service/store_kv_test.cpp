// The Redis front over the real store through the group committer: a SET's
// reply never precedes the commit of its batch, a failed batch answers every
// SET in it with an error (none OK), and pipelined SETs from several
// connections all read back.
#include "service/store_kv.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "tests/resp/socket_client.h"
#include "tests/support/scratch.h"

namespace ccpool::service {
namespace {

using namespace ccpool::resp::testing;

constexpr const char* kRefused =
    "-ERR the ccpool store refused the value (store full or unavailable; see the service log)\r\n";

// Batch 1 waits for open(); batch `fail_batch` fails as a whole (as a failed
// commit would); every other batch is written by the store.
class BatchSeam {
 public:
  cache::GroupCommitter::BatchWriter writer(cache::Store& store) {
    return [this, &store](std::vector<cache::PreparedPut>& batch) {
      int number;
      {
        std::unique_lock lock(m_mutex);
        number = ++m_batches;
        m_cv.wait(lock, [&] { return m_open; });
      }
      if (number == fail_batch) {
        return std::vector<Result<void>>(batch.size(),
                                         make_error(ErrorCode::kIo, "injected commit failure"));
      }
      return store.write_prepared(batch);
    };
  }
  void open() {
    std::lock_guard lock(m_mutex);
    m_open = true;
    m_cv.notify_all();
  }
  int fail_batch = 0;

 private:
  std::mutex m_mutex;
  std::condition_variable m_cv;
  bool m_open = false;
  int m_batches = 0;
};

class StoreKvFrontTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache::StoreOptions options;
    options.dir = ccpool::testing::scratch_dir() + "/store";
    auto store = cache::Store::open(options);
    ASSERT_TRUE(store) << store.error().message;
    m_store = std::move(*store);
    m_storage = std::make_unique<Storage>(*m_store, nullptr, m_seam.writer(*m_store));
    m_kv = std::make_unique<StoreKv>(*m_storage);
    resp::FrontOptions front_options;
    front_options.unix_path = ccpool::testing::scratch_dir() + "/resp.sock";
    auto front = resp::Front::start(front_options, *m_kv);
    ASSERT_TRUE(front) << front.error().message;
    m_front = std::move(*front);
  }
  void TearDown() override {
    m_seam.open();
    m_front.reset();
    m_kv.reset();
    m_storage.reset();
  }
  bool stored(const std::string& key) {
    auto entry = m_store->peek(StoreKv::store_key(key), false);
    return entry && *entry;
  }
  void wait_for_commands(uint64_t n) {
    for (int i = 0; i < 10000 && m_front->counters().commands < n; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_GE(m_front->counters().commands, n);
  }

  BatchSeam m_seam;
  std::unique_ptr<cache::Store> m_store;
  std::unique_ptr<Storage> m_storage;
  std::unique_ptr<StoreKv> m_kv;
  std::unique_ptr<resp::Front> m_front;
};

TEST_F(StoreKvFrontTest, ReplyAfterCommitAndFailedBatchAllErrors) {
  m_seam.fail_batch = 2;
  UniqueFd first = connect_unix(m_front->unix_path());
  ASSERT_TRUE(send_all(first.get(), command({"SET", "first", "1"})));
  wait_for_commands(1);
  // Batch 1 is held before its commit: no reply, nothing stored.
  pollfd p{first.get(), POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 200), 0);
  EXPECT_FALSE(stored("first"));

  // While it is held, 4 connections pipeline 25 SETs each: they queue as batch 2.
  constexpr int kClients = 4, kSets = 25;
  std::vector<UniqueFd> fds;
  for (int c = 0; c < kClients; ++c) {
    fds.push_back(connect_unix(m_front->unix_path()));
    std::string request;
    for (int i = 0; i < kSets; ++i)
      request += command({"SET", "k" + std::to_string(c * 100 + i), "v"});
    ASSERT_TRUE(send_all(fds.back().get(), request));
  }
  wait_for_commands(1 + kClients * kSets);
  m_seam.open();

  EXPECT_EQ(read_exact(first.get(), 5), "+OK\r\n");
  EXPECT_TRUE(stored("first"));
  std::string refused_all;
  for (int i = 0; i < kSets; ++i) refused_all += kRefused;
  for (int c = 0; c < kClients; ++c) {
    EXPECT_EQ(read_exact(fds[c].get(), refused_all.size()), refused_all) << "client " << c;
    for (int i = 0; i < kSets; ++i) EXPECT_FALSE(stored("k" + std::to_string(c * 100 + i)));
  }
  cache::GroupCommitStats s = m_storage->commit_stats();
  EXPECT_EQ(s.batches, 2u);
  EXPECT_EQ(s.failed_batches, 1u);
  EXPECT_EQ(s.largest_batch, static_cast<uint64_t>(kClients * kSets));
}

TEST_F(StoreKvFrontTest, PipelinedSetsFromManyClientsReadBack) {
  m_seam.open();
  constexpr int kClients = 6, kSets = 100;
  std::vector<int> good(kClients, 0);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      UniqueFd fd = connect_unix(m_front->unix_path());
      std::string sets, ok, gets, values;
      for (int i = 0; i < kSets; ++i) {
        std::string key = "c" + std::to_string(c) + ":" + std::to_string(i);
        std::string value = key + std::string(i * 10, 'v');
        sets += command({"SET", key, value});
        ok += "+OK\r\n";
        gets += command({"GET", key});
        values += bulk(value);
      }
      if (round_trip(fd.get(), sets, ok.size()) != ok) return;
      if (round_trip(fd.get(), gets, values.size()) != values) return;
      good[c] = 1;
    });
  }
  for (auto& t : clients) t.join();
  for (int c = 0; c < kClients; ++c) EXPECT_EQ(good[c], 1) << "client " << c;
  EXPECT_EQ(m_store->stats()->entries, static_cast<uint64_t>(kClients * kSets));
  cache::GroupCommitStats s = m_storage->commit_stats();
  EXPECT_EQ(s.entries, static_cast<uint64_t>(kClients * kSets));
  EXPECT_EQ(s.failed_batches, 0u);
}

}  // namespace
}  // namespace ccpool::service
