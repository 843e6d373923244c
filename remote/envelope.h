// The byte layout of every value the tier writes to Redis (docs/remote.md).
// All integers little-endian:
//   offset  size  field
//   0       4     magic "CCPR"
//   4       1     version (1)
//   5       1     flags: bit 0 = signed
//   6       2     reserved, zero
//   8       8     value length in bytes
//   16      32    HMAC-SHA256(hmac key, bytes[0,16) || digest (16 raw bytes) || value)
//                 present only when signed
//   16|48   n     value (opaque: the store's packed entry)
// Signing binds the value to its cache key, so a valid entry cannot be
// replayed under another key. The header is always written so that garbage
// is rejected before the store's validator runs.
#pragma once

#include <string>
#include <string_view>

#include "base/hash.h"

namespace ccpool::remote {

inline constexpr size_t kEnvelopeHeader = 16;
inline constexpr size_t kEnvelopeMac = 32;
inline constexpr uint8_t kEnvelopeVersion = 1;

// hmac_key empty = unsigned. Returns an empty string only when OpenSSL
// cannot compute the MAC (the caller drops the write).
std::string seal(const Digest& key, std::string_view value, std::string_view hmac_key);

enum class OpenStatus { kOk, kMalformed, kBadSignature };

// On kOk, `sealed` is turned into the bare value in place. With an hmac_key,
// anything without a valid signature (no header, unsigned, wrong MAC,
// truncated) is kBadSignature. Without one, a bad header or length is
// kMalformed and a signature, if any, is not checked.
OpenStatus open_envelope(const Digest& key, std::string& sealed, std::string_view hmac_key);

}  // namespace ccpool::remote
