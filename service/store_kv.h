// The Redis-protocol front's storage: plain key/value entries (kind kBlob) in
// the node store, read and written through the cluster tier when configured.
// Store key = XXH3-128("resp\0" + redis key); the Redis key is kept as the
// entry's label so `ccpool cache ls/show` display it. With a cluster tier, DEL
// writes a tombstone (an entry that expired at once) locally and to Redis, so
// neither this node nor another fetches the old value back.
#pragma once

#include <atomic>

#include "resp/front.h"
#include "service/storage.h"

namespace ccpool::service {

class StoreKv : public resp::KvBackend {
 public:
  explicit StoreKv(Storage& storage) : m_storage(storage) {}

  std::optional<std::string> get(std::string_view key) override;
  bool set(std::string_view key, std::string_view value, int64_t expires_at_ms) override;
  // Queued to the storage's group committer; `done` runs once its batch committed.
  void set_async(std::string_view key, std::string_view value, int64_t expires_at_ms,
                 SetDone done) override;
  void end_of_burst() override { m_storage.commit_queued(); }
  bool del(std::string_view key) override;
  bool exists(std::string_view key) override;
  bool expire(std::string_view key, int64_t expires_at_ms) override;
  int64_t expires_at(std::string_view key) override;

  static Digest store_key(std::string_view redis_key);
  uint64_t remote_hits() const { return m_remote_hits.load(); }

 private:
  std::optional<cache::Entry> load(const Digest& key, bool with_bodies);
  bool save(const Digest& key, const cache::Entry& entry);
  static cache::Entry blob(std::string_view key, std::string_view value, int64_t expires_at_ms);

  Storage& m_storage;
  std::atomic<uint64_t> m_remote_hits{0};
};

}  // namespace ccpool::service
