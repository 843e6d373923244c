// Body codec: the one place that calls zstd. A stored body is
//   u8 codec (0 = raw, 1 = zstd) | u64 raw_size (LE) | payload
// The checksum (XXH3-128 of the raw bytes) is the body's key, not part of the value.
// Nothing here trusts raw_size: it is checked against the caller's limit first,
// and decoded bytes go into a buffer that grows only as bytes really come out.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/hash.h"
#include "base/thread_annotations.h"

namespace ccpool::cache {

inline constexpr size_t kBodyHeaderSize = 9;

class Codec {
 public:
  // Levels above 19 are written at 19, so every frame fits the decoder's window limit.
  explicit Codec(int level);
  ~Codec();
  Codec(const Codec&) = delete;
  Codec& operator=(const Codec&) = delete;

  // Compresses `raw`; keeps it raw when zstd does not make it smaller.
  std::string encode(std::string_view raw);
  // Decompresses and hashes chunk by chunk as the bytes come out; any mismatch
  // (size, zstd frame, checksum) is kCorruption naming `what`, and so is a
  // declared raw size above `max_raw`. Memory: the bytes actually produced,
  // at most max_raw (plus one 256 KiB slice), never what the header claims.
  Result<std::string> decode(std::string_view stored, const Digest& expected,
                             const std::string& what, uint64_t max_raw);
  // The same checks as decode() without keeping the bytes: decompresses into
  // one fixed 256 KiB slice and hashes it, so memory does not depend on the body.
  Result<void> verify(std::string_view stored, const Digest& expected, const std::string& what,
                      uint64_t max_raw);
  // Structure-only check of a stored body (no decompression).
  static bool header_ok(std::string_view stored, uint64_t* raw_size);

 private:
  void* take_dctx();
  void give_dctx(void* dctx);
  void* take_cctx();
  void give_cctx(void* cctx);
  // Shared by decode/verify: keeps the decoded bytes in *keep when non-null.
  Result<void> run(std::string_view stored, const Digest& expected, const std::string& what,
                   uint64_t max_raw, std::string* keep);

  int m_level;
  Mutex m_mutex;
  std::vector<void*> m_dctx GUARDED_BY(m_mutex);  // ZSTD_DCtx*
  std::vector<void*> m_cctx GUARDED_BY(m_mutex);  // ZSTD_CCtx*
};

}  // namespace ccpool::cache
