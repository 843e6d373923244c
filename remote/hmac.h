// The only file pair that calls OpenSSL: HMAC-SHA256, a constant-time
// compare and random bytes for the node token.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace ccpool::remote {

using Mac = std::array<uint8_t, 32>;

// HMAC-SHA256(key, parts[0] || parts[1] || ...). Returns false only when
// OpenSSL fails (no SHA256 provider), which callers treat as "cannot sign".
bool hmac_sha256(std::string_view key, std::initializer_list<std::string_view> parts, Mac& out);

bool constant_time_equal(const void* a, const void* b, size_t size);

// Cryptographically random bytes, hex encoded (2*n characters).
std::string random_hex(size_t n);

}  // namespace ccpool::remote
