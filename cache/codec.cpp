#include "cache/codec.h"

#include <zstd.h>

#include <algorithm>
#include <cstring>

namespace ccpool::cache {
namespace {

constexpr uint8_t kCodecRaw = 0;
constexpr uint8_t kCodecZstd = 1;
// Hash each decompressed slice while it is still in cache.
constexpr size_t kVerifyChunk = 256 * 1024;
// zstd allocates the window a frame header asks for. Levels up to 19 (the
// highest encode() uses) never ask for more than 2^23 bytes, so a larger one
// is refused before anything is allocated.
constexpr int kMaxLevel = 19;
constexpr int kMaxWindowLog = 23;
constexpr uint64_t kOneShotMax = 4 << 20;
// Bodies this small are stored raw. Such a body fits in an LMDB leaf node
// (the limit is about half of a 4 KiB page), so compressing it saves at most
// part of one page, while reading a zstd frame back costs a frame setup that
// dominates a small read (a 1 KiB Redis-front GET spent a fifth of its time in
// it; BENCHMARKS.md, "Issue 27, second pass").
constexpr size_t kRawMax = 2048;

void put_u64(char* p, uint64_t v) {
  std::memcpy(p, &v, 8);
}  // little-endian hosts only (x86-64, aarch64)

}  // namespace

Codec::~Codec() {
  for (void* d : m_dctx) ZSTD_freeDCtx(static_cast<ZSTD_DCtx*>(d));
  for (void* c : m_cctx) ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(c));
}

Codec::Codec(int level) : m_level(std::min(level, kMaxLevel)) {}

void* Codec::take_dctx() {
  MutexLock lock(&m_mutex);
  if (m_dctx.empty()) {
    ZSTD_DCtx* d = ZSTD_createDCtx();
    if (d) ZSTD_DCtx_setParameter(d, ZSTD_d_windowLogMax, kMaxWindowLog);
    return d;
  }
  void* d = m_dctx.back();
  m_dctx.pop_back();
  return d;
}
void Codec::give_dctx(void* d) {
  MutexLock lock(&m_mutex);
  m_dctx.push_back(d);
}
void* Codec::take_cctx() {
  MutexLock lock(&m_mutex);
  if (m_cctx.empty()) return ZSTD_createCCtx();
  void* c = m_cctx.back();
  m_cctx.pop_back();
  return c;
}
void Codec::give_cctx(void* c) {
  MutexLock lock(&m_mutex);
  m_cctx.push_back(c);
}

std::string Codec::encode(std::string_view raw) {
  if (raw.size() <= kRawMax) {
    std::string out(kBodyHeaderSize, '\0');
    out[0] = static_cast<char>(kCodecRaw);
    put_u64(out.data() + 1, raw.size());
    out.append(raw);
    return out;
  }
  std::string out(kBodyHeaderSize + ZSTD_compressBound(raw.size()), '\0');
  out[0] = static_cast<char>(kCodecZstd);
  put_u64(out.data() + 1, raw.size());
  auto* cctx = static_cast<ZSTD_CCtx*>(take_cctx());
  size_t n = ZSTD_compressCCtx(cctx, out.data() + kBodyHeaderSize, out.size() - kBodyHeaderSize,
                               raw.data(), raw.size(), m_level);
  give_cctx(cctx);
  if (ZSTD_isError(n) || n >= raw.size()) {
    out.resize(kBodyHeaderSize);
    out[0] = static_cast<char>(kCodecRaw);
    out.append(raw);
    return out;
  }
  out.resize(kBodyHeaderSize + n);
  return out;
}

bool Codec::header_ok(std::string_view stored, uint64_t* raw_size) {
  if (stored.size() < kBodyHeaderSize) return false;
  auto codec = static_cast<uint8_t>(stored[0]);
  std::memcpy(raw_size, stored.data() + 1, 8);
  if (codec == kCodecRaw) return stored.size() - kBodyHeaderSize == *raw_size;
  return codec == kCodecZstd;
}

Result<std::string> Codec::decode(std::string_view stored, const Digest& expected,
                                  const std::string& what, uint64_t max_raw) {
  std::string out;
  CCPOOL_TRY(run(stored, expected, what, max_raw, &out));
  return out;
}

Result<void> Codec::verify(std::string_view stored, const Digest& expected, const std::string& what,
                           uint64_t max_raw) {
  return run(stored, expected, what, max_raw, nullptr);
}

Result<void> Codec::run(std::string_view stored, const Digest& expected, const std::string& what,
                        uint64_t max_raw, std::string* keep) {
  uint64_t raw_size = 0;
  if (!header_ok(stored, &raw_size))
    return make_error(ErrorCode::kCorruption, what + ": bad body header");
  if (raw_size > max_raw) {
    return make_error(ErrorCode::kCorruption, what + ": declares " + std::to_string(raw_size) +
                                                  " raw bytes, more than the limit of " +
                                                  std::to_string(max_raw));
  }
  std::string_view payload = stored.substr(kBodyHeaderSize);
  if (static_cast<uint8_t>(stored[0]) == kCodecRaw) {
    if (hash_bytes(payload) != expected)
      return make_error(ErrorCode::kCorruption, what + ": checksum mismatch");
    if (keep) keep->assign(payload);
    return ok();
  }
  // The frame must declare its content size, equal to raw_size: zstd then
  // sizes its buffers by the smaller of that and the window (at most 8 MiB).
  unsigned long long content_size = ZSTD_getFrameContentSize(payload.data(), payload.size());
  if (content_size == ZSTD_CONTENTSIZE_UNKNOWN || content_size == ZSTD_CONTENTSIZE_ERROR ||
      content_size != raw_size) {
    return make_error(ErrorCode::kCorruption, what + ": compressed body does not decode");
  }
  // Kept bodies up to kOneShotMax raw bytes: one call into a buffer of
  // exactly raw_size, which the caller needs anyway (a header that lies
  // costs at most that allocation). Checking without keeping (put_packed,
  // import, verify: bytes from outside) stays in one fixed slice below, so
  // what a value claims never sizes an allocation there.
  if (keep != nullptr && raw_size <= kOneShotMax) {
    // One frame and nothing after it; a second frame or trailing bytes are corrupt.
    if (ZSTD_findFrameCompressedSize(payload.data(), payload.size()) != payload.size()) {
      return make_error(ErrorCode::kCorruption, what + ": compressed body does not decode");
    }
    std::string& out = *keep;
    out.resize(static_cast<size_t>(raw_size));
    auto* dctx = static_cast<ZSTD_DCtx*>(take_dctx());
    size_t n = ZSTD_decompressDCtx(dctx, out.data(), out.size(), payload.data(), payload.size());
    give_dctx(dctx);
    if (ZSTD_isError(n) || n != raw_size) {
      return make_error(ErrorCode::kCorruption, what + ": compressed body does not decode");
    }
    if (hash_bytes(out) != expected)
      return make_error(ErrorCode::kCorruption, what + ": checksum mismatch");
    return ok();
  }
  // Larger: the output grows one slice at a time as zstd produces bytes
  // (std::string doubles its capacity), so a header that lies about raw_size
  // costs nothing.
  std::string window;
  std::string& out = keep ? *keep : window;
  out.clear();
  auto* dctx = static_cast<ZSTD_DCtx*>(take_dctx());
  ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only);
  Hasher hasher;
  ZSTD_inBuffer in{payload.data(), payload.size(), 0};
  uint64_t done = 0;
  size_t rc = 1;
  while (done < raw_size) {
    size_t slice = static_cast<size_t>(std::min<uint64_t>(kVerifyChunk, raw_size - done));
    size_t base = keep ? static_cast<size_t>(done) : 0;
    if (out.size() < base + slice) out.resize(base + slice);
    size_t in_before = in.pos;
    ZSTD_outBuffer ob{out.data() + base, slice, 0};
    rc = ZSTD_decompressStream(dctx, &ob, &in);
    if (ZSTD_isError(rc) || (ob.pos == 0 && in.pos == in_before)) break;
    hasher.update(std::string_view(out.data() + base, ob.pos));
    done += ob.pos;
    if (rc == 0) break;  // the frame ended
  }
  bool bad = ZSTD_isError(rc) || done != raw_size;
  if (!bad && rc != 0) {  // the frame epilogue may still be pending; it must yield no bytes
    char extra;
    ZSTD_outBuffer ob{&extra, 1, 0};
    rc = ZSTD_decompressStream(dctx, &ob, &in);
    bad = ZSTD_isError(rc) || ob.pos != 0 || rc != 0;
  }
  give_dctx(dctx);
  if (bad || in.pos != in.size) {  // short, long or trailing bytes: corrupt
    return make_error(ErrorCode::kCorruption, what + ": compressed body does not decode");
  }
  if (hasher.digest() != expected)
    return make_error(ErrorCode::kCorruption, what + ": checksum mismatch");
  if (keep) out.resize(static_cast<size_t>(done));
  return ok();
}

}  // namespace ccpool::cache
