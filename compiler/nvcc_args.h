// nvcc command lines: which are one cacheable job (`nvcc -c` of one .cu
// source and a known set of options that write no file of their own). A
// pure function of the text, unit-tested on its own; the model that uses it
// is nvcc_model.cpp. Anything not understood is refused (pass-through), see
// docs/cache-keys.md, "nvcc".
#pragma once

#include <string>
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
// -arch/-code/-gencode naming `native` are refused (nvcc asks the GPU).
NvccArgs parse_nvcc_args(const std::vector<std::string>& argv);

}  // namespace ccpool::compiler
