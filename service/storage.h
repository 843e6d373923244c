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
// Thread-safe: the Store and the Tier are.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"
#include "base/hash.h"
#include "base/histogram.h"
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
  Storage(cache::Store& local, remote::Tier* tier) : m_local(local), m_tier(tier) {}
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  // nullopt: in neither tier (or unreadable there: errors are logged, and a
  // corrupt local entry was already evicted by the store).
  std::optional<Found> get(const Digest& key, Bodies bodies = Bodies::kWith,
                           Touch touch = Touch::kCount);
  // Writes a value another node made (already verified by the tier's envelope)
  // into the node store. False when the store refused it.
  bool adopt_packed(const Digest& key, std::string_view packed);
  // Node store, then write-behind to the tier. False when the node store
  // refused the write (logged); the tier is then not written either.
  Result<void> put(const Digest& key, const cache::Entry& entry);

  cache::Store& local() { return m_local; }
  bool has_tier() const { return m_tier != nullptr; }

  // Latency of get()'s lookup in each tier, for metrics: the node store read
  // (checksums and decompression included), the cluster tier's GET.
  Histogram::Snapshot local_latency() const { return m_local_latency.snapshot(); }
  Histogram::Snapshot tier_latency() const { return m_tier_latency.snapshot(); }

 private:
  std::optional<cache::Entry> read_local(const Digest& key, Bodies bodies, Touch touch);

  cache::Store& m_local;
  remote::Tier* m_tier;
  Histogram m_local_latency;
  Histogram m_tier_latency;
};

}  // namespace ccpool::service
