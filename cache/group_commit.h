// Group commit: many puts share one LMDB write transaction (one fsync).
//
// Callers submit() a put with a completion. The entry is prepared (hashed,
// compressed, encoded) on the caller's thread; one writer thread owned by the
// committer takes everything queued (up to max_entries / max_bytes) and writes
// it with Store::write_prepared. When the previous batch had more than one
// member, a batch that is not full first waits at most max_delay for more.
// Completions run on the writer thread, in submission order, only after the
// transaction holding their put committed (or failed): a caller told "stored"
// can rely on the entry being committed. A failed transaction fails every
// member of its batch with the same error. A key put more than once in one
// batch (ranks storing the same artifact, a client SETting one key in a loop)
// is written once, by its last put in submission order, which leaves the
// state sequential puts would; the superseded puts complete with that put's
// result, after its commit. An entry invalid on its own (larger
// than max_size) is refused by submit() itself: its completion runs at once,
// on the calling thread.
//
// Under light load the writer finds one put and commits it at once; under
// load, puts that arrive while a batch commits form the next batch, so commits
// per second stay bounded while puts per second grow with the load. The added
// latency of a put is at most max_delay plus one commit of the batch ahead.
//
// Thread-safe. Completions must be short and must not call put() (that would
// wait for the thread running them). The destructor commits what is queued,
// then joins the writer.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/thread_annotations.h"
#include "cache/store.h"

namespace ccpool::cache {

struct GroupCommitOptions {
  size_t max_entries = 1024;                 // puts in one transaction
  uint64_t max_bytes = 32ull << 20;          // raw bytes of outputs in one transaction
  std::chrono::microseconds max_delay{200};  // how long a non-full batch waits for more
};

struct GroupCommitStats {
  uint64_t batches = 0, entries = 0, largest_batch = 0, failed_batches = 0;
  uint64_t coalesced =
      0;  // puts superseded by a later put of their key in the same batch (not written)
};

class GroupCommitter {
 public:
  using Done = std::function<void(const Result<void>& stored)>;
  // Writes one batch in one transaction; one result per member, in order.
  // Store::write_prepared by default; tests pass a seam that fails or holds batches.
  using BatchWriter = std::function<std::vector<Result<void>>(std::vector<PreparedPut>& batch)>;

  explicit GroupCommitter(Store& store, GroupCommitOptions options = {});
  GroupCommitter(Store& store, BatchWriter writer, GroupCommitOptions options);
  ~GroupCommitter();
  GroupCommitter(const GroupCommitter&) = delete;
  GroupCommitter& operator=(const GroupCommitter&) = delete;

  void submit(const PutRequest& request, Done done) {
    submit(request.key, request.entry, std::move(done));
  }
  // The entry is only read (prepared on this thread), never copied.
  void submit(const Digest& key, const Entry& entry, Done done);
  // submit() and wait for the batch holding it. Never call from a completion.
  Result<void> put(const Digest& key, const Entry& entry);
  // Puts that belong together (a result and the manifest naming it), queued
  // next to each other and committed at once, without waiting out max_delay:
  // one transaction unless max_entries, max_bytes or a full map splits them,
  // and then in order. Waits for all; one result per put, in order. A put that
  // cannot be prepared fails alone, as in submit(). Never call from a completion.
  struct PutRef {
    const Digest& key;
    const Entry& entry;
  };
  std::vector<Result<void>> put_all(const std::vector<PutRef>& puts);
  // What is queued now commits without waiting out max_delay: a submitter
  // that knows it has nothing more to add for a while (the Redis front's loop
  // after a pass over its sockets) says so.
  void commit_queued();

  GroupCommitStats stats() const;

 private:
  struct Pending {
    PreparedPut put;
    Done done;
    uint64_t bytes = 0;
  };
  void run();
  std::vector<Pending> take_batch() REQUIRES(m_mutex);

  Store& m_store;
  BatchWriter m_writer;
  GroupCommitOptions m_options;
  mutable Mutex m_mutex;
  CondVar m_wake{&m_mutex};  // the writer waits here for puts or stop
  std::deque<Pending> m_queue GUARDED_BY(m_mutex);
  uint64_t m_queued_bytes GUARDED_BY(m_mutex) = 0;
  bool m_stopping GUARDED_BY(m_mutex) = false;
  bool m_commit_now GUARDED_BY(m_mutex) = false;  // commit_queued() since the last batch was taken
  size_t m_last_batch GUARDED_BY(m_mutex) = 0;
  GroupCommitStats m_stats GUARDED_BY(m_mutex);
  std::thread m_thread;  // last: started once the members above exist
};

}  // namespace ccpool::cache
