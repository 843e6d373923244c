// libFuzzer target for the Redis tier's value envelope (remote/envelope.cpp):
// open_envelope with and without an HMAC key. A value that opens re-seals to
// the same bytes (signed or not, as it came), so the only accepted inputs are
// ones a node could have written.
//
// Replay: the `fuzz.remote_envelope_fuzz` CTest test. Long run: docs/fuzzing.md.
#include <cstddef>
#include <cstdint>
#include <string>

#include "remote/envelope.h"

namespace {

void check(bool condition) {
  if (!condition) __builtin_trap();
}

constexpr std::string_view kKey = "fuzz-hmac-key-0123456789abcdef";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ccpool;
  std::string input(reinterpret_cast<const char*>(data), size);
  Digest key = hash_bytes("fuzz-entry");
  for (bool with_key : {false, true}) {
    std::string sealed = input;
    remote::OpenStatus status =
        remote::open_envelope(key, sealed, with_key ? kKey : std::string_view());
    if (status != remote::OpenStatus::kOk) continue;
    check(sealed.size() <= input.size());
    bool was_signed = input.size() >= 6 && (input[5] & 1);
    if (with_key || !was_signed) {
      check(remote::seal(key, sealed, with_key ? kKey : std::string_view()) == input);
    }
  }
  // Whatever the fuzzer makes up, sealing and opening it round-trips.
  for (std::string_view hmac : {std::string_view(), kKey}) {
    std::string sealed = remote::seal(key, input, hmac);
    check(remote::open_envelope(key, sealed, hmac) == remote::OpenStatus::kOk && sealed == input);
  }
  return 0;
}
