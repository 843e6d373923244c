// GroupCommitter: batching, order, error propagation to every member of a
// batch, and a batch larger than the map, against a real store and a seam.
#include "cache/group_commit.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

#include "tests/cache/store_fixture.h"

namespace ccpool::cache {
namespace {

using testing::make_entry;
using testing::open_store;
using testing::test_key;

Entry blob(const std::string& value) {
  Entry e;
  e.kind = EntryKind::kBlob;
  e.outputs.push_back({"value", 0644, 0, {}, value});
  return e;
}

std::string value_of(Store& store, const Digest& key) {
  auto e = store.peek(key, true);
  if (!e || !*e || (*e)->outputs.empty()) return "<missing>";
  return (*e)->outputs.front().data;
}

// Holds every batch until release() and records batch sizes; then writes to
// the store (or fails the batch whose number is `fail_batch`, 1-based).
class GatedWriter {
 public:
  explicit GatedWriter(Store& store) : m_store(store) {}
  GroupCommitter::BatchWriter writer() {
    return [this](std::vector<PreparedPut>& batch) {
      std::unique_lock lock(m_mutex);
      m_sizes.push_back(batch.size());
      m_arrived.notify_all();
      m_cv.wait(lock, [&] { return m_open; });
      if (static_cast<int>(m_sizes.size()) == fail_batch) {
        return std::vector<Result<void>>(batch.size(),
                                         make_error(ErrorCode::kIo, "injected batch failure"));
      }
      lock.unlock();
      return m_store.write_prepared(batch);
    };
  }
  void wait_for_batches(size_t n) {
    std::unique_lock lock(m_mutex);
    m_arrived.wait(lock, [&] { return m_sizes.size() >= n; });
  }
  void release() {
    std::lock_guard lock(m_mutex);
    m_open = true;
    m_cv.notify_all();
  }
  std::vector<size_t> sizes() {
    std::lock_guard lock(m_mutex);
    return m_sizes;
  }
  int fail_batch = 0;

 private:
  Store& m_store;
  std::mutex m_mutex;
  std::condition_variable m_cv, m_arrived;
  bool m_open = false;
  std::vector<size_t> m_sizes;
};

TEST(GroupCommitTest, PutsArrivingDuringACommitShareTheNextTransaction) {
  auto store = open_store();
  GatedWriter gate(*store);
  GroupCommitOptions options;
  options.max_delay = std::chrono::microseconds(0);
  std::atomic<int> stored{0};
  {
    GroupCommitter committer(*store, gate.writer(), options);
    auto count = [&](const Result<void>& r) { stored += r ? 1 : 0; };
    committer.submit({test_key(0), blob("first")}, count);
    gate.wait_for_batches(1);  // the writer holds batch 1 open
    for (int i = 1; i <= 50; ++i)
      committer.submit({test_key(i), blob("v" + std::to_string(i))}, count);
    gate.release();
  }  // the destructor commits everything queued
  EXPECT_EQ(stored.load(), 51);
  EXPECT_EQ(gate.sizes(), (std::vector<size_t>{1, 50}));
  EXPECT_EQ(value_of(*store, test_key(0)), "first");
  for (int i = 1; i <= 50; ++i) EXPECT_EQ(value_of(*store, test_key(i)), "v" + std::to_string(i));
}

TEST(GroupCommitTest, BatchesAreBoundedByEntriesAndBytes) {
  auto store = open_store();
  GatedWriter gate(*store);
  GroupCommitOptions options;
  options.max_entries = 8;
  options.max_bytes = 10 * 1000;
  {
    GroupCommitter committer(*store, gate.writer(), options);
    committer.submit({test_key(100), blob("x")}, {});
    gate.wait_for_batches(1);
    for (int i = 0; i < 20; ++i) committer.submit({test_key(i), blob("small")}, {});
    for (int i = 20; i < 23; ++i) committer.submit({test_key(i), blob(std::string(6000, 'b'))}, {});
    gate.release();
  }
  // 20 small ones in batches of 8, 8, 4 + the first large one; then one large per batch.
  EXPECT_EQ(gate.sizes(), (std::vector<size_t>{1, 8, 8, 5, 1, 1}));
  EXPECT_EQ(store->stats()->entries, 24u);
}

TEST(GroupCommitTest, CompletionsRunInSubmissionOrderAndTheLastWriteWins) {
  auto store = open_store();
  std::vector<int> order;
  std::mutex order_mutex;
  {
    GroupCommitter committer(*store);
    for (int i = 0; i < 200; ++i) {
      committer.submit({test_key(7), blob("v" + std::to_string(i))}, [&, i](const Result<void>& r) {
        EXPECT_TRUE(r) << r.error().message;
        std::lock_guard lock(order_mutex);
        order.push_back(i);
      });
    }
  }
  ASSERT_EQ(order.size(), 200u);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(order[i], i);
  EXPECT_EQ(value_of(*store, test_key(7)), "v199");
  EXPECT_EQ(store->stats()->entries, 1u);
}

// Eight ranks storing the same artifact, or a client that SETs one key in a
// loop, put one key several times into one batch: only the last put of each
// key is written (sequential puts would leave the same state), and the
// superseded ones complete with its result, after its commit.
TEST(GroupCommitTest, AKeyPutTwiceInOneBatchIsWrittenOnceAndTheLastWins) {
  auto store = open_store();
  GatedWriter gate(*store);
  std::vector<int> outcome(5, -1);  // 1 stored, 0 failed
  GroupCommitStats stats;
  {
    GroupCommitter committer(*store, gate.writer(), GroupCommitOptions{});
    auto record = [&](int i) {
      return [&outcome, i](const Result<void>& r) { outcome[i] = r ? 1 : 0; };
    };
    committer.submit({test_key(0), blob("first")}, record(0));
    gate.wait_for_batches(1);  // batch 1 is held: the next four queue behind it
    committer.submit({test_key(1), blob("a")}, record(1));
    committer.submit({test_key(1), blob("b")}, record(2));
    committer.submit({test_key(2), blob("x")}, record(3));
    std::promise<void> last_done;
    committer.submit({test_key(1), blob("c")}, [&](const Result<void>& r) {
      record(4)(r);
      last_done.set_value();
    });
    gate.release();
    last_done.get_future().wait();  // completions run in order, after the batch's stats are counted
    stats = committer.stats();
  }
  EXPECT_EQ(gate.sizes(), (std::vector<size_t>{1, 2}));
  EXPECT_EQ(outcome, (std::vector<int>{1, 1, 1, 1, 1}));
  EXPECT_EQ(value_of(*store, test_key(1)), "c");
  EXPECT_EQ(value_of(*store, test_key(2)), "x");
  EXPECT_EQ(store->stats()->entries, 3u);
  EXPECT_EQ(stats.batches, 2u);
  EXPECT_EQ(stats.entries, 5u);    // puts, superseded ones included
  EXPECT_EQ(stats.coalesced, 2u);  // "a" and "b"
}

// The Redis front's loop says "nothing more from me for now" after each pass
// over its sockets: what is queued commits without waiting out max_delay.
TEST(GroupCommitTest, CommitQueuedEndsTheBatchDelay) {
  auto store = open_store();
  GatedWriter gate(*store);
  GroupCommitOptions options;
  options.max_delay = std::chrono::hours(1);
  GroupCommitter committer(*store, gate.writer(), options);
  committer.submit({test_key(0), blob("first")}, {});
  gate.wait_for_batches(1);
  committer.submit({test_key(1), blob("a")}, {});
  std::promise<void> second_batch;
  committer.submit({test_key(2), blob("b")},
                   [&](const Result<void>&) { second_batch.set_value(); });
  gate.release();
  second_batch.get_future().wait();  // a batch of 2: the next one waits up to max_delay for company
  std::promise<bool> stored;
  committer.submit({test_key(4), blob("d")},
                   [&](const Result<void>& r) { stored.set_value(r.has_value()); });
  committer.commit_queued();
  std::future<bool> result = stored.get_future();
  ASSERT_EQ(result.wait_for(std::chrono::seconds(60)), std::future_status::ready)
      << "waited out max_delay";
  EXPECT_TRUE(result.get());
  EXPECT_EQ(value_of(*store, test_key(4)), "d");
}

// A result and its manifest: one transaction, committed at once even when the
// committer would wait for company (the batch before had two members).
TEST(GroupCommitTest, PutAllCommitsItsPutsTogetherWithoutWaitingForCompany) {
  auto store = open_store();
  GatedWriter gate(*store);
  GroupCommitOptions options;
  options.max_delay = std::chrono::hours(1);
  GroupCommitter committer(*store, gate.writer(), options);
  gate.release();
  Entry first = blob("first"), second = blob("second");
  std::vector<Result<void>> put = committer.put_all({{test_key(0), first}, {test_key(1), second}});
  ASSERT_EQ(put.size(), 2u);
  EXPECT_TRUE(put[0] && put[1]);
  // The last batch had two members; a second put_all must not wait an hour.
  auto again = std::async(std::launch::async, [&] {
    return committer.put_all({{test_key(2), first}, {test_key(3), second}});
  });
  std::future_status waited = again.wait_for(std::chrono::seconds(60));
  if (waited != std::future_status::ready) committer.commit_queued();  // end it, then fail
  EXPECT_EQ(waited, std::future_status::ready) << "put_all waited out max_delay";
  EXPECT_TRUE(again.get()[1]);
  EXPECT_EQ(gate.sizes(), (std::vector<size_t>{2, 2}));
  EXPECT_EQ(value_of(*store, test_key(1)), "second");
  EXPECT_EQ(value_of(*store, test_key(3)), "second");
}

TEST(GroupCommitTest, PutAllFailsAPutThatCannotBePreparedAlone) {
  StoreOptions options = testing::options();
  options.max_size = 64 * 1024;
  auto store = open_store(options);
  GroupCommitter committer(*store);
  Entry huge = make_entry("huge", 200 * 1024, 2), small = make_entry("small", 1000, 1);
  std::vector<Result<void>> put = committer.put_all({{test_key(1), small}, {test_key(2), huge}});
  ASSERT_EQ(put.size(), 2u);
  EXPECT_TRUE(put[0]);
  ASSERT_FALSE(put[1]);
  EXPECT_EQ(put[1].error().code, ErrorCode::kFull);
  EXPECT_EQ(store->stats()->entries, 1u);
  // Nothing preparable: nothing queued, nothing waited for.
  std::vector<Result<void>> none = committer.put_all({{test_key(3), huge}});
  ASSERT_FALSE(none[0]);
  EXPECT_EQ(committer.stats().batches, 1u);
}

// A superseded put is not "stored" unless the put that superseded it was.
TEST(GroupCommitTest, ASupersededPutFailsWithThePutThatSupersededIt) {
  auto store = open_store();
  GatedWriter gate(*store);
  gate.fail_batch = 2;
  std::vector<int> outcome(4, -1);
  {
    GroupCommitter committer(*store, gate.writer(), GroupCommitOptions{});
    auto record = [&](int i) {
      return [&outcome, i](const Result<void>& r) { outcome[i] = r ? 1 : 0; };
    };
    committer.submit({test_key(0), blob("first")}, record(0));
    gate.wait_for_batches(1);
    committer.submit({test_key(1), blob("a")}, record(1));
    committer.submit({test_key(2), blob("x")}, record(2));
    committer.submit({test_key(1), blob("b")}, record(3));
    gate.release();
  }
  EXPECT_EQ(gate.sizes(), (std::vector<size_t>{1, 2}));
  EXPECT_EQ(outcome, (std::vector<int>{1, 0, 0, 0}));
  EXPECT_EQ(value_of(*store, test_key(1)), "<missing>");
}

TEST(GroupCommitTest, AFailedTransactionFailsEveryMemberOfItsBatchAndNoOther) {
  auto store = open_store();
  GatedWriter gate(*store);
  gate.fail_batch = 2;
  std::vector<int> outcome(31, -1);  // 1 stored, 0 failed
  {
    GroupCommitter committer(*store, gate.writer(), GroupCommitOptions{});
    auto record = [&](int i) {
      return [&outcome, i](const Result<void>& r) {
        outcome[i] = r ? 1 : 0;
        if (!r) {
          EXPECT_EQ(r.error().message, "injected batch failure");
        }
      };
    };
    committer.submit({test_key(0), blob("a")}, record(0));
    gate.wait_for_batches(1);
    for (int i = 1; i <= 30; ++i) committer.submit({test_key(i), blob("b")}, record(i));
    gate.release();
  }
  ASSERT_EQ(gate.sizes().size(), 2u);
  EXPECT_EQ(outcome[0], 1);
  EXPECT_EQ(value_of(*store, test_key(0)), "a");
  for (int i = 1; i <= 30; ++i) {
    EXPECT_EQ(outcome[i], 0) << i;
    EXPECT_EQ(value_of(*store, test_key(i)), "<missing>") << i;
  }
}

TEST(GroupCommitTest, AnOversizedEntryFailsAloneInItsBatch) {
  StoreOptions options = testing::options();
  options.max_size = 64 * 1024;
  auto store = open_store(options);
  std::vector<PutRequest> batch;
  batch.push_back({test_key(1), make_entry("small", 1000, 1)});
  batch.push_back({test_key(2), make_entry("huge", 200 * 1024, 2)});
  batch.push_back({test_key(3), make_entry("small", 1000, 3)});
  std::vector<Result<void>> results = store->put_batch(batch);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_TRUE(results[0]);
  ASSERT_FALSE(results[1]);
  EXPECT_EQ(results[1].error().code, ErrorCode::kFull);
  EXPECT_TRUE(results[2]);
  EXPECT_EQ(store->stats()->entries, 2u);
}

TEST(GroupCommitTest, AnOversizedPutIsRefusedAtSubmitAndOthersCommit) {
  StoreOptions options = testing::options();
  options.max_size = 64 * 1024;
  auto store = open_store(options);
  GroupCommitter committer(*store);
  std::optional<Result<void>> refused;
  committer.submit({test_key(2), make_entry("huge", 200 * 1024, 2)},
                   [&](const Result<void>& r) { refused = r; });
  ASSERT_TRUE(refused.has_value());  // completed at once, on this thread
  ASSERT_FALSE(*refused);
  EXPECT_EQ(refused->error().code, ErrorCode::kFull);
  EXPECT_TRUE(committer.put(test_key(1), make_entry("small", 1000, 1)));
  EXPECT_EQ(store->stats()->entries, 1u);
  EXPECT_EQ(committer.stats().entries, 1u);
}

TEST(GroupCommitTest, ABatchLargerThanTheFullMapIsSplitNotFailed) {
  StoreOptions options = testing::options();
  options.initial_map_size = 256 * 1024;
  options.max_map_size = 2 << 20;  // 60 x 64 KiB = 3.75 MiB cannot fit one transaction
  auto store = open_store(options);
  std::vector<PutRequest> batch;
  for (int i = 0; i < 60; ++i) batch.push_back({test_key(i), make_entry("o", 64 * 1024, i)});
  std::vector<Result<void>> results = store->put_batch(batch);
  for (int i = 0; i < 60; ++i) EXPECT_TRUE(results[i]) << i << ": " << results[i].error().message;
  auto s = store->stats();
  EXPECT_LE(s->map_size, 2u << 20);
  EXPECT_GT(s->evictions, 0u);
  EXPECT_TRUE(*store->get(test_key(59)));  // the newest survives
}

TEST(GroupCommitTest, SynchronousPutsFromManyThreadsAllLand) {
  auto store = open_store();
  GroupCommitter committer(*store);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        if (!committer.put(test_key(t * 100 + i), blob(std::to_string(t * 100 + i)))) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(store->stats()->entries, 200u);
  GroupCommitStats s = committer.stats();
  EXPECT_EQ(s.entries, 200u);
  EXPECT_LE(s.batches, 200u);
  for (int t = 0; t < 8; ++t)
    EXPECT_EQ(value_of(*store, test_key(t * 100 + 24)), std::to_string(t * 100 + 24));
}

}  // namespace
}  // namespace ccpool::cache
