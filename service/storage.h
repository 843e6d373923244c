// The service's one storage path: the node store, read through to the cluster
// tier and written behind to it (the shape of ccache's storage::Storage).
//
// get(): the node store first; on a miss, the tier. A tier value is stored
// locally as a packed entry and read back from the node store, so the store's
// checksums verify it before anything is served. put(): the node store, then an
// asynchronous write-back of the stored packed entry to the tier. Callers that
// store a result and the manifest pointing at it must put the result first:
// another node must never find a manifest whose result it cannot fetch.
//
// Writes go through one cache::GroupCommitter: concurrent puts (compile
// results, Redis-front SETs) share a write transaction, and each put returns
// (or its completion runs) only once the transaction holding it committed.
//
// Thread-safe: the Store, the Tier and the committer are. Destroy the Storage
// before the Store and the Tier: the destructor commits what is queued.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"
#include "base/hash.h"
#include "base/histogram.h"
#include "cache/group_commit.h"
#include "cache/store.h"
#include "remote/tier.h"

namespace ccpool::service {

enum class Source { kLocal, kRemote };

struct Found {
  cache::Entry entry;
  Source source = Source::kLocal;
};

enum class Bodies { kWith, kWithout };
enum class Touch { kCount, kPeek };  // kCount: a use (hit counters, LRU); kPeek: neither

class Storage {
 public:
  Storage(cache::Store& local, remote::Tier* tier, cache::GroupCommitOptions commit = {});
  // Tests: `writer` replaces Store::put_batch (e.g. to fail or hold a batch).
  Storage(cache::Store& local, remote::Tier* tier, cache::GroupCommitter::BatchWriter writer);
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  // nullopt: in neither tier (or unreadable there: errors are logged, and a
  // corrupt local entry was already evicted by the store).
  std::optional<Found> get(const Digest& key, Bodies bodies = Bodies::kWith,
                           Touch touch = Touch::kCount);
  // get() in two halves, for callers that decide between them (the Redis
  // front's DEL tombstones): the node store only; the tier only (its value is
  // stored locally, then read back from the node store). get_local with
  // cache::Expired::kKeep also returns an entry whose expiry passed (a peek,
  // Touch::kPeek, always does).
  std::optional<Found> get_local(const Digest& key, Bodies bodies = Bodies::kWith,
                                 Touch touch = Touch::kCount,
                                 cache::Expired expired = cache::Expired::kHide);
  std::optional<Found> get_remote(const Digest& key, Bodies bodies = Bodies::kWith,
                                  Touch touch = Touch::kCount);
  // Writes a value another node made (already verified by the tier's envelope)
  // into the node store. False when the store refused it.
  bool adopt_packed(const Digest& key, std::string_view packed);
  // Node store, then write-behind to the tier. False when the node store
  // refused the write (logged); the tier is then not written either.
  Result<void> put(const Digest& key, const cache::Entry& entry);
  // put() of puts that belong together, in one commit where they fit
  // (cache::GroupCommitter::put_all); written behind to the tier in order, up
  // to the first that failed. One result per put, in order.
  std::vector<Result<void>> put_all(const std::vector<cache::GroupCommitter::PutRef>& puts);
  // put() without waiting: `done` runs once, on the committer's thread, after
  // the batch holding this put committed (or failed); keep it short.
  using PutDone = std::function<void(const Result<void>&)>;
  void put_async(const Digest& key, const cache::Entry& entry, PutDone done);
  void commit_queued() { m_commit->commit_queued(); }  // see GroupCommitter::commit_queued
  cache::GroupCommitStats commit_stats() const { return m_commit->stats(); }

  cache::Store& local() { return m_local; }
  bool has_tier() const { return m_tier != nullptr; }

  // Latency of get()'s lookup in each tier, for metrics: the node store read
  // (checksums and decompression included), the cluster tier's GET.
  Histogram::Snapshot local_latency() const { return m_local_latency.snapshot(); }
  Histogram::Snapshot tier_latency() const { return m_tier_latency.snapshot(); }

 private:
  std::optional<cache::Entry> read_local(const Digest& key, Bodies bodies, Touch touch,
                                         cache::Expired expired = cache::Expired::kHide);
  void write_behind(const Digest& key);

  cache::Store& m_local;
  remote::Tier* m_tier;
  Histogram m_local_latency;
  Histogram m_tier_latency;
  std::unique_ptr<cache::GroupCommitter> m_commit;  // last: drained before the rest goes
};

}  // namespace ccpool::service
