// libFuzzer target for the archive reader (cache/archive_reader.cpp) and what
// import does with each entry before writing it: unpack_entry, decode_record
// and Codec::verify of every body. The file comes from fmemopen, so a
// declared length can only be met by bytes that are really there; the reader
// must never hold more than the input (checked through the visitor).
//
// Replay: the `fuzz.archive_fuzz` CTest test. Long run: docs/fuzzing.md.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "cache/archive_reader.h"
#include "cache/codec.h"
#include "cache/record.h"

namespace {

void check(bool condition) {
  if (!condition) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ccpool;
  if (size == 0) return 0;
  std::string copy(reinterpret_cast<const char*>(data), size);
  std::FILE* file = fmemopen(copy.data(), copy.size(), "rb");
  if (!file) return 0;
  static auto* codec = new cache::Codec(1);
  uint64_t visited = 0;
  auto result = cache::read_archive(
      file, "fuzz.ccpool", 4096,
      [&](const Digest&, std::optional<std::string_view> packed, uint64_t index) -> Result<void> {
        check(index == visited++);
        if (!packed) return ok();
        check(packed->size() <= 4096 && packed->size() <= size);
        CCPOOL_TRY_ASSIGN(cache::UnpackedEntry u, cache::unpack_entry(*packed));
        CCPOOL_TRY_ASSIGN(cache::Record rec, cache::decode_record(u.record));
        for (const cache::PackedBody& b : u.bodies) {
          (void)codec->verify(b.stored, b.digest, "fuzz", 1 << 20);
        }
        (void)rec;
        return ok();
      });
  std::fclose(file);
  if (result) check(*result == visited);
  return 0;
}
