#include "remote/envelope.h"

#include <cstring>

#include "remote/hmac.h"

namespace ccpool::remote {
namespace {

constexpr char kMagic[4] = {'C', 'C', 'P', 'R'};
constexpr uint8_t kFlagSigned = 1;

std::string_view digest_view(const Digest& key) {
  return {reinterpret_cast<const char*>(key.bytes.data()), key.bytes.size()};
}

void put_u64(char* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

uint64_t get_u64(const char* in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(in[i])) << (8 * i);
  return v;
}

}  // namespace

std::string seal(const Digest& key, std::string_view value, std::string_view hmac_key) {
  bool sign = !hmac_key.empty();
  char header[kEnvelopeHeader] = {};
  std::memcpy(header, kMagic, 4);
  header[4] = static_cast<char>(kEnvelopeVersion);
  header[5] = static_cast<char>(sign ? kFlagSigned : 0);
  put_u64(header + 8, value.size());
  std::string out;
  out.reserve(kEnvelopeHeader + (sign ? kEnvelopeMac : 0) + value.size());
  out.append(header, kEnvelopeHeader);
  if (sign) {
    Mac mac;
    if (!hmac_sha256(hmac_key, {std::string_view(header, kEnvelopeHeader), digest_view(key), value},
                     mac)) {
      return {};
    }
    out.append(reinterpret_cast<const char*>(mac.data()), mac.size());
  }
  out.append(value);
  return out;
}

OpenStatus open_envelope(const Digest& key, std::string& sealed, std::string_view hmac_key) {
  bool require = !hmac_key.empty();
  OpenStatus bad = require ? OpenStatus::kBadSignature : OpenStatus::kMalformed;
  if (sealed.size() < kEnvelopeHeader || std::memcmp(sealed.data(), kMagic, 4) != 0 ||
      static_cast<uint8_t>(sealed[4]) != kEnvelopeVersion || (sealed[5] & ~kFlagSigned) != 0 ||
      sealed[6] != 0 || sealed[7] != 0) {
    return bad;
  }
  bool is_signed = (sealed[5] & kFlagSigned) != 0;
  size_t body = kEnvelopeHeader + (is_signed ? kEnvelopeMac : 0);
  if (sealed.size() < body || get_u64(sealed.data() + 8) != sealed.size() - body) return bad;
  if (require) {
    if (!is_signed) return OpenStatus::kBadSignature;
    Mac mac;
    std::string_view value = std::string_view(sealed).substr(body);
    if (!hmac_sha256(hmac_key,
                     {std::string_view(sealed.data(), kEnvelopeHeader), digest_view(key), value},
                     mac) ||
        !constant_time_equal(mac.data(), sealed.data() + kEnvelopeHeader, kEnvelopeMac)) {
      return OpenStatus::kBadSignature;
    }
  }
  sealed.erase(0, body);
  return OpenStatus::kOk;
}

}  // namespace ccpool::remote
