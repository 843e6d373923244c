// libFuzzer target for nvcc command-line classification
// (compiler/nvcc_args.cpp). The input is argv (one argument per line) up to a
// line "%%" (what follows was dryrun text, which nvcc no longer parses).
// Checks: no crash; an accepted command names its source and output.
//
// Replay: the `fuzz.nvcc_fuzz` CTest test. Long run: docs/fuzzing.md.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/nvcc_args.h"

namespace {

void check(bool condition) {
  if (!condition) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  size_t split = input.find("\n%%\n");
  std::string_view args_text = input.substr(0, split);

  std::vector<std::string> argv = {"nvcc"};
  size_t pos = 0;
  while (pos <= args_text.size() && argv.size() < 256) {
    size_t end = args_text.find('\n', pos);
    if (end == std::string_view::npos) end = args_text.size();
    argv.emplace_back(args_text.substr(pos, end - pos));
    pos = end + 1;
  }
  ccpool::compiler::NvccArgs a = ccpool::compiler::parse_nvcc_args(argv);
  check(a.refused.empty() == a.refused_code.empty());
  if (a.refused.empty()) check(!a.source.empty() && !a.output.empty());

  return 0;
}
