// XXH3-128 digests: cache keys, output checksums and file-content identity.
// xxhash is called only in hash.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"

namespace ccpool {

struct Digest {
  std::array<uint8_t, 16> bytes{};  // big-endian canonical form of XXH128

  std::string hex() const;  // 32 lowercase hex chars
  static std::optional<Digest> from_hex(std::string_view hex);
  auto operator<=>(const Digest&) const = default;
};

Digest hash_bytes(std::string_view data);

// Streaming hasher. Fields added with add_field() are length-prefixed, so
// ("ab","c") and ("a","bc") never collide.
class Hasher {
 public:
  Hasher();
  ~Hasher();
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;

  void update(std::string_view data);
  void add_field(std::string_view data);
  void add_u64(uint64_t value);
  Digest digest() const;

 private:
  void* m_state;  // XXH3_state_t*
};

// Hashes a file's content by streaming it; no whole-file buffer.
Result<Digest> hash_file(const std::string& path);

}  // namespace ccpool

template <>
struct std::hash<ccpool::Digest> {
  size_t operator()(const ccpool::Digest& d) const noexcept {
    size_t v;
    __builtin_memcpy(&v, d.bytes.data(), sizeof v);
    return v;
  }
};
