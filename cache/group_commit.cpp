#include "cache/group_commit.h"

#include <pthread.h>

#include <future>
#include <unordered_map>

namespace ccpool::cache {
namespace {

uint64_t raw_bytes(const Entry& entry) {
  uint64_t total = entry.stdout_data.size() + entry.stderr_data.size();
  for (const Output& out : entry.outputs) total += out.data.size();
  return total;
}

}  // namespace

GroupCommitter::GroupCommitter(Store& store, GroupCommitOptions options)
    : GroupCommitter(
          store, [&store](std::vector<PreparedPut>& batch) { return store.write_prepared(batch); },
          options) {}

GroupCommitter::GroupCommitter(Store& store, BatchWriter writer, GroupCommitOptions options)
    : m_store(store), m_writer(std::move(writer)), m_options(options) {
  m_options.max_entries = std::max<size_t>(m_options.max_entries, 1);
  m_thread = std::thread([this] { run(); });
}

GroupCommitter::~GroupCommitter() {
  {
    MutexLock lock(&m_mutex);
    m_stopping = true;
  }
  m_wake.signal_all();
  m_thread.join();
}

void GroupCommitter::submit(const Digest& key, const Entry& entry, Done done) {
  uint64_t bytes = raw_bytes(entry);
  Result<PreparedPut> prepared = m_store.prepare_put(key, entry);
  if (!prepared) {
    if (done) done(tl::unexpected(std::move(prepared.error())));
    return;
  }
  bool wake;
  {
    MutexLock lock(&m_mutex);
    // The writer needs waking only when it may sleep on an empty queue, or
    // when it waits out max_delay and this put fills the batch; waking it
    // for every put costs a context switch each while it collects a batch.
    wake = m_queue.empty();
    m_queue.push_back(Pending{std::move(*prepared), std::move(done), bytes});
    m_queued_bytes += bytes;
    wake = wake || m_queue.size() >= m_options.max_entries || m_queued_bytes >= m_options.max_bytes;
  }
  if (wake) m_wake.signal();
}

Result<void> GroupCommitter::put(const Digest& key, const Entry& entry) {
  std::promise<Result<void>> stored;
  std::future<Result<void>> result = stored.get_future();
  submit(key, entry, [&stored](const Result<void>& r) { stored.set_value(r); });
  return result.get();
}

std::vector<Result<void>> GroupCommitter::put_all(const std::vector<PutRef>& puts) {
  std::vector<Result<void>> results(puts.size(), ok());
  // Completions run in submission order on the writer thread, so the last
  // queued one runs after every other: it alone wakes this thread.
  std::promise<void> all_done;
  std::future<void> finished = all_done.get_future();
  std::vector<Pending> pending;
  pending.reserve(puts.size());
  for (size_t i = 0; i < puts.size(); ++i) {
    Result<PreparedPut> prepared = m_store.prepare_put(puts[i].key, puts[i].entry);
    if (!prepared) {
      results[i] = tl::unexpected(std::move(prepared.error()));
      continue;
    }
    pending.push_back(Pending{std::move(*prepared),
                              [&results, i](const Result<void>& r) { results[i] = r; },
                              raw_bytes(puts[i].entry)});
  }
  if (pending.empty()) return results;
  Done last = std::move(pending.back().done);
  pending.back().done = [&all_done, last = std::move(last)](const Result<void>& r) {
    last(r);
    all_done.set_value();
  };
  {
    MutexLock lock(&m_mutex);
    for (Pending& p : pending) {
      m_queued_bytes += p.bytes;
      m_queue.push_back(std::move(p));
    }
    m_commit_now = true;  // the group is complete: nothing to wait for
  }
  m_wake.signal();
  finished.get();
  return results;
}

void GroupCommitter::commit_queued() {
  {
    MutexLock lock(&m_mutex);
    if (m_queue.empty()) return;
    m_commit_now = true;
  }
  m_wake.signal();
}

GroupCommitStats GroupCommitter::stats() const {
  MutexLock lock(&m_mutex);
  return m_stats;
}

// The front of the queue, bounded by max_entries and max_bytes (but always at
// least one put, however large).
std::vector<GroupCommitter::Pending> GroupCommitter::take_batch() {
  std::vector<Pending> batch;
  uint64_t bytes = 0;
  while (!m_queue.empty() && batch.size() < m_options.max_entries) {
    Pending& next = m_queue.front();
    if (!batch.empty() && bytes + next.bytes > m_options.max_bytes) break;
    bytes += next.bytes;
    batch.push_back(std::move(next));
    m_queue.pop_front();
  }
  m_queued_bytes -= bytes;
  return batch;
}

void GroupCommitter::run() {
  pthread_setname_np(pthread_self(), "ccpool-commit");
  while (true) {
    std::vector<Pending> batch;
    {
      MutexLock lock(&m_mutex);
      while (m_queue.empty() && !m_stopping) m_wake.wait();
      if (m_queue.empty()) return;  // stopping, and everything queued is committed
      // Under concurrency (the last batch had company) a batch that is not
      // full waits up to max_delay for more; a lone put commits at once.
      auto deadline = std::chrono::steady_clock::now() + m_options.max_delay;
      while (m_last_batch > 1 && !m_stopping && !m_commit_now &&
             m_queue.size() < m_options.max_entries && m_queued_bytes < m_options.max_bytes &&
             m_wake.wait_until(deadline)) {
      }
      m_commit_now = false;
      batch = take_batch();
    }
    // A key put more than once in this batch is written once, by its last put
    // (sequential puts would leave that state); the earlier ones take its result.
    std::vector<Digest> keys;
    keys.reserve(batch.size());
    std::unordered_map<Digest, size_t> last;  // key -> its last member
    for (size_t i = 0; i < batch.size(); ++i) last[keys.emplace_back(batch[i].put.key())] = i;
    std::vector<size_t> slot(batch.size());  // index in `puts` of the put that decides member i
    std::vector<PreparedPut> puts;
    puts.reserve(last.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      if (last[keys[i]] != i) continue;
      slot[i] = puts.size();
      puts.push_back(std::move(batch[i].put));
    }
    for (size_t i = 0; i < batch.size(); ++i) slot[i] = slot[last[keys[i]]];
    std::vector<Result<void>> results = m_writer(puts);
    bool failed = false;
    for (size_t p = 0; p < puts.size(); ++p) {
      if (p >= results.size()) {
        results.push_back(
            make_error(ErrorCode::kIo, "group commit: the batch writer returned too few results"));
      }
      failed = failed || !results[p];
    }
    {
      MutexLock lock(&m_mutex);
      m_last_batch = batch.size();
      m_stats.batches += 1;
      m_stats.entries += batch.size();
      m_stats.coalesced += batch.size() - puts.size();
      m_stats.largest_batch = std::max<uint64_t>(m_stats.largest_batch, batch.size());
      if (failed) m_stats.failed_batches += 1;
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      if (batch[i].done) batch[i].done(results[slot[i]]);
    }
  }
}

}  // namespace ccpool::cache
