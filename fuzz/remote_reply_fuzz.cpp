// libFuzzer target for the Redis tier's reply reader (remote/reply_reader.cpp):
// bytes a Redis server (or a man in the middle) sends, fed in chunks whose
// sizes come from the input, under bounds also taken from the input. A reply
// that completes stays inside those bounds; the reader never holds more
// bytes than it was fed.
//
// Replay: the `fuzz.remote_reply_fuzz` CTest test. Long run: docs/fuzzing.md.
#include <cstddef>
#include <cstdint>
#include <string>

#include "remote/reply_reader.h"

namespace {

void check(bool condition) {
  if (!condition) __builtin_trap();
}

struct Size {
  uint64_t bulk = 0, strings = 0, elements = 0;
  size_t depth = 0;
};

void measure(const ccpool::remote::Reply& r, size_t depth, Size& size) {
  using Type = ccpool::remote::Reply::Type;
  if (r.type == Type::kString) {
    size.bulk = std::max<uint64_t>(size.bulk, r.str.size());
  }
  size.strings += r.str.size();
  size.depth = std::max(size.depth, depth);
  if (r.type == Type::kArray) {
    size.elements += r.elements.size();
    for (const auto& e : r.elements) measure(e, depth + 1, size);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ccpool::remote;
  if (size < 4) return 0;
  ReplyLimits limits;
  limits.max_bulk = data[0] * 16u;
  limits.max_elements = data[1] % 32u;
  limits.max_depth = data[2] % 4u;
  limits.max_line = 64;
  limits.max_total = data[3] * 64u;
  size_t chunk = 1 + data[0] % 7;
  std::string_view input(reinterpret_cast<const char*>(data) + 4, size - 4);
  ReplyReader reader(limits);
  uint64_t fed = 0;
  while (!input.empty()) {
    std::string_view part = input.substr(0, chunk);
    input.remove_prefix(part.size());
    auto done = reader.feed(part);
    if (!done) return 0;
    fed += part.size();
    check(fed <= limits.max_total);
    if (*done) {
      if (!input.empty()) {  // bytes after the reply are refused
        check(!reader.feed(input));
        return 0;
      }
      Size s;
      measure(reader.take(), 0, s);
      check(s.bulk <= limits.max_bulk);
      check(s.elements <= limits.max_elements);
      check(s.depth <= limits.max_depth);
      check(s.strings <= fed);
      return 0;
    }
  }
  return 0;
}
