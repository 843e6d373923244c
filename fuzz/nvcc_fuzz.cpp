// libFuzzer target for nvcc command-line classification and `nvcc --dryrun`
// parsing (compiler/nvcc_args.cpp). The input is argv (one argument per line)
// up to a line "%%", then dryrun text. Checks: no crash; an accepted command
// names its source and output; a parsed dryrun has commands, none empty.
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
  std::string_view dryrun_text =
      split == std::string_view::npos ? std::string_view() : input.substr(split + 4);

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

  ccpool::compiler::Dryrun d = ccpool::compiler::parse_dryrun(dryrun_text);
  if (d.error.empty()) {
    check(!d.commands.empty());
    for (const auto& c : d.commands) check(!c.words.empty());
  }
  return 0;
}
