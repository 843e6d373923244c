// libFuzzer target for the parsers of compiler probe output
// (compiler/probe_output.cpp): the `-E -v` include search list and the
// `-###` command lines. Checks: no crash, and nothing parsed holds more
// bytes than the input.
//
// Replay: the `fuzz.cc_probe_fuzz` CTest test. Long run: docs/fuzzing.md.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "compiler/probe_output.h"

namespace {

void check(bool condition) {
  if (!condition) __builtin_trap();
}

size_t total(const std::vector<std::string>& items) {
  size_t n = 0;
  for (const auto& s : items) n += s.size();
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ccpool::compiler;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto list = parse_search_list(text)) {
    check(total(list->quote) + total(list->bracket) + total(list->missing) <= size);
  }
  check(total(last_command_words(text)) <= size);
  check(total(split_command_line(text)) <= size);
  return 0;
}
