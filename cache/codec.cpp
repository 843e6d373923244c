#include "cache/codec.h"

#include <zstd.h>

#include <cstring>

namespace ccpool::cache {
namespace {

constexpr uint8_t kCodecRaw = 0;
constexpr uint8_t kCodecZstd = 1;
// Hash each decompressed slice while it is still in cache.
constexpr size_t kVerifyChunk = 256 * 1024;

void put_u64(char* p, uint64_t v) { std::memcpy(p, &v, 8); }  // little-endian hosts only (x86-64, aarch64)

}  // namespace

Codec::~Codec() {
  for (void* d : m_dctx) ZSTD_freeDCtx(static_cast<ZSTD_DCtx*>(d));
  for (void* c : m_cctx) ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(c));
}

void* Codec::take_dctx() {
  std::lock_guard lock(m_mutex);
  if (m_dctx.empty()) return ZSTD_createDCtx();
  void* d = m_dctx.back();
  m_dctx.pop_back();
  return d;
}
void Codec::give_dctx(void* d) {
  std::lock_guard lock(m_mutex);
  m_dctx.push_back(d);
}
void* Codec::take_cctx() {
  std::lock_guard lock(m_mutex);
  if (m_cctx.empty()) return ZSTD_createCCtx();
  void* c = m_cctx.back();
  m_cctx.pop_back();
  return c;
}
void Codec::give_cctx(void* c) {
  std::lock_guard lock(m_mutex);
  m_cctx.push_back(c);
}

std::string Codec::encode(std::string_view raw) {
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
                                  const std::string& what) {
  uint64_t raw_size = 0;
  if (!header_ok(stored, &raw_size) || raw_size > (1ull << 40)) {
    return make_error(ErrorCode::kCorruption, what + ": bad body header");
  }
  std::string_view payload = stored.substr(kBodyHeaderSize);
  std::string out;
  if (static_cast<uint8_t>(stored[0]) == kCodecRaw) {
    out.assign(payload);
    if (hash_bytes(out) != expected) return make_error(ErrorCode::kCorruption, what + ": checksum mismatch");
    return out;
  }
  out.resize(raw_size);
  auto* dctx = static_cast<ZSTD_DCtx*>(take_dctx());
  ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only);
  Hasher hasher;
  ZSTD_inBuffer in{payload.data(), payload.size(), 0};
  size_t done = 0;
  size_t rc = 1;
  bool bad = false;
  while (done < raw_size && rc != 0) {
    ZSTD_outBuffer ob{out.data(), std::min<size_t>(raw_size, done + kVerifyChunk), done};
    rc = ZSTD_decompressStream(dctx, &ob, &in);
    if (ZSTD_isError(rc) || (ob.pos == done && in.pos == in.size)) break;
    hasher.update(std::string_view(out.data() + done, ob.pos - done));
    done = ob.pos;
  }
  bad = ZSTD_isError(rc) || done != raw_size;
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
  if (hasher.digest() != expected) return make_error(ErrorCode::kCorruption, what + ": checksum mismatch");
  return out;
}

}  // namespace ccpool::cache
