// nvcc command lines: which are one cacheable job (`nvcc -c` of one .cu
// source and a known, file-free set of options) and what `nvcc --dryrun`
// says nvcc would run for them. Pure functions of the text, unit-tested on
// their own; the model that uses them is nvcc_model.cpp. Anything not
// understood is refused (pass-through), see docs/cache-keys.md, "nvcc".
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace ccpool::compiler {

struct NvccArgs {
  std::string refused;       // non-empty: pass-through, with the reason (for humans)
  std::string refused_code;  // the stable reason code when refused
  std::string source;        // as written
  std::string output;        // as written; the default `<source stem>.o` when no -o
};

// Classifies argv (argv[0] is nvcc). Accepted: -c with one source (.cu, or
// any name after `-x cu`), -o, -I, -isystem, -D, -U, -O, -arch, -code,
// -gencode, -std, -Xcompiler (each item checked), -ccbin, -lineinfo, -G, -g,
// -m64, --use_fast_math, --expt-relaxed-constexpr, --extended-lambda,
// -maxrregcount, in their long, `=` and (for one-letter ones) attached forms.
NvccArgs parse_nvcc_args(const std::vector<std::string>& argv);

// One command of `nvcc --dryrun` (stderr lines starting with "#$ "), after
// the shell words were split and $VARS expanded from the assignments
// printed before it.
struct DryrunCommand {
  std::vector<std::string> words;
};
struct Dryrun {
  std::map<std::string, std::string> vars;  // NAME=value lines (last one wins), unquoted
  std::vector<DryrunCommand> commands;
  std::string error;  // non-empty: not understood
};
Dryrun parse_dryrun(std::string_view text);

// `word` with the per-process part of nvcc's temp names removed
// ("tmpxft_00002580_00000000-5_k.ii" -> "tmpxft_-5_k.ii"): what is left of a
// dryrun command is the same for every run of the same command.
std::string without_temp_ids(std::string_view word);

}  // namespace ccpool::compiler
