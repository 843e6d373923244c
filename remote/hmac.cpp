#include "remote/hmac.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include <random>

namespace ccpool::remote {

bool hmac_sha256(std::string_view key, std::initializer_list<std::string_view> parts, Mac& out) {
  EVP_MAC* mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  if (mac == nullptr) return false;
  EVP_MAC_CTX* ctx = EVP_MAC_CTX_new(mac);
  char digest_name[] = "SHA256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest_name, 0),
                         OSSL_PARAM_construct_end()};
  bool good =
      ctx != nullptr && EVP_MAC_init(ctx, reinterpret_cast<const unsigned char*>(key.data()),
                                     key.size(), params) == 1;
  for (std::string_view part : parts) {
    good = good && EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(part.data()),
                                  part.size()) == 1;
  }
  size_t len = 0;
  good = good && EVP_MAC_final(ctx, out.data(), &len, out.size()) == 1 && len == out.size();
  EVP_MAC_CTX_free(ctx);
  EVP_MAC_free(mac);
  return good;
}

bool constant_time_equal(const void* a, const void* b, size_t size) {
  return CRYPTO_memcmp(a, b, size) == 0;
}

std::string random_hex(size_t n) {
  std::string raw(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(n)) != 1) {
    // The token only needs to be unique, not secret: fall back to the OS RNG.
    std::random_device rd;
    for (char& c : raw) c = static_cast<char>(rd());
  }
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : raw) {
    hex += kHex[c >> 4];
    hex += kHex[c & 15];
  }
  return hex;
}

}  // namespace ccpool::remote
