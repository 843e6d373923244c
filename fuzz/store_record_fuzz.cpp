// libFuzzer target for the store's table values and packed entries
// (cache/record.cpp, docs/store-format.md): decode_record, unpack_entry and
// the usage/counters/lru decoders. Whatever decodes must re-encode to the same
// bytes, so nothing is accepted that the writer could not have written.
//
// Replay: the `fuzz.store_record_fuzz` CTest test. Long run: docs/fuzzing.md.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "cache/record.h"

namespace {

void check(bool condition) {
  if (!condition) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ccpool::cache;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  if (auto rec = decode_record(in)) {
    check(encode_record(*rec) == in);
    uint64_t logical = 0;
    for (const BodyRef& b : rec->bodies()) logical += b.size;  // wraps harmlessly; must not crash
    (void)logical;
  }
  if (auto packed = unpack_entry(in)) {
    std::string again = pack_entry(packed->record, packed->bodies);
    check(again == in);
    if (auto rec = decode_record(packed->record)) check(encode_record(*rec) == packed->record);
  }
  Usage usage = decode_usage(in);
  if (size == 16) check(encode_usage(usage) == in);
  Counters counters = decode_counters(in);
  if (size == 72) check(encode_counters(counters) == in);
  (void)entry_of_lru_key(in);
  return 0;
}
