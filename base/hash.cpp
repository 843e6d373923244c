#include "base/hash.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace ccpool {
namespace {

Digest to_digest(XXH128_hash_t h) {
  XXH128_canonical_t canon;
  XXH128_canonicalFromHash(&canon, h);
  Digest d;
  std::memcpy(d.bytes.data(), canon.digest, 16);
  return d;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string Digest::hex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(32, '0');
  for (size_t i = 0; i < 16; ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 0xf];
  }
  return out;
}

std::optional<Digest> Digest::from_hex(std::string_view hex) {
  if (hex.size() != 32) return std::nullopt;
  Digest d;
  for (size_t i = 0; i < 16; ++i) {
    int hi = hex_value(hex[2 * i]);
    int lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    d.bytes[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return d;
}

Digest hash_bytes(std::string_view data) {
  return to_digest(XXH3_128bits(data.data(), data.size()));
}

Hasher::Hasher() : m_state(XXH3_createState()) {
  XXH3_128bits_reset(static_cast<XXH3_state_t*>(m_state));
}

Hasher::~Hasher() {
  XXH3_freeState(static_cast<XXH3_state_t*>(m_state));
}

void Hasher::update(std::string_view data) {
  XXH3_128bits_update(static_cast<XXH3_state_t*>(m_state), data.data(), data.size());
}

void Hasher::add_u64(uint64_t value) {
  update(std::string_view(reinterpret_cast<const char*>(&value), sizeof value));
}

void Hasher::add_field(std::string_view data) {
  add_u64(data.size());
  update(data);
}

Digest Hasher::digest() const {
  return to_digest(XXH3_128bits_digest(static_cast<XXH3_state_t*>(m_state)));
}

Result<Digest> hash_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return make_error(errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo,
                      "cannot open '" + path + "': " + std::strerror(errno));
  }
  Hasher hasher;
  char buf[64 * 1024];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return make_error(ErrorCode::kIo, "cannot read '" + path + "': " + std::strerror(err));
    }
    hasher.update(std::string_view(buf, static_cast<size_t>(n)));
  }
  ::close(fd);
  return hasher.digest();
}

}  // namespace ccpool
