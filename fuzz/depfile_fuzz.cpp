// libFuzzer target for the Make dependency-file parser (compiler/depfile.cpp),
// which reads what the compiler wrote after every miss. Checks: no crash, no
// empty prerequisite, and the prerequisites never hold more bytes than the input.
//
// Replay: the `fuzz.depfile_fuzz` CTest test. Long run: docs/fuzzing.md.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "compiler/depfile.h"

namespace {

void check(bool condition) {
  if (!condition) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto deps = ccpool::compiler::parse_depfile(text);
  if (!deps) return 0;
  size_t bytes = 0;
  for (const auto& d : *deps) {
    check(!d.empty());
    bytes += d.size();
  }
  check(bytes <= size);
  return 0;
}
