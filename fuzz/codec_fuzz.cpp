// libFuzzer target for cache::Codec (the store's body format: u8 codec |
// u64 raw_size | payload). decode() and verify() must agree; what decodes has
// exactly the declared size and checksum; and a limit is never exceeded,
// whatever raw_size claims. Every input also round-trips through encode().
//
// Input: 1 byte picks the limit, the rest is the stored body. The expected
// digest is the XXH3-128 of the payload when the codec is raw, so raw bodies
// can decode; zstd bodies mostly fail their checksum, which still exercises
// every decoding path up to it.
//
// Replay: the `fuzz.codec_fuzz` CTest test. Long run: docs/fuzzing.md.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "cache/codec.h"

namespace {

void check(bool condition) {
  if (!condition) __builtin_trap();
}

ccpool::cache::Codec& codec() {
  static auto* c = new ccpool::cache::Codec(1);
  return *c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ccpool;
  if (size < 1) return 0;
  uint64_t limit = uint64_t{1} << (data[0] % 24);  // 1 B .. 8 MiB
  std::string_view stored(reinterpret_cast<const char*>(data) + 1, size - 1);
  Digest expected =
      hash_bytes(stored.size() > cache::kBodyHeaderSize ? stored.substr(cache::kBodyHeaderSize)
                                                        : std::string_view());
  auto decoded = codec().decode(stored, expected, "fuzz", limit);
  auto verified = codec().verify(stored, expected, "fuzz", limit);
  check(decoded.has_value() == verified.has_value());
  if (decoded) {
    uint64_t raw_size = 0;
    check(cache::Codec::header_ok(stored, &raw_size));
    check(decoded->size() == raw_size && raw_size <= limit);
    check(hash_bytes(*decoded) == expected);
  }
  std::string encoded = codec().encode(stored);
  auto back = codec().decode(encoded, hash_bytes(stored), "fuzz", stored.size());
  check(back.has_value() && *back == stored);
  return 0;
}
