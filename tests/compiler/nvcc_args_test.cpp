// nvcc command-line classification (compiler/nvcc_args.cpp), without
// running nvcc.
#include "compiler/nvcc_args.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ccpool::compiler {
namespace {

NvccArgs parse(std::vector<std::string> args) {
  args.insert(args.begin(), "nvcc");
  return parse_nvcc_args(args);
}

TEST(NvccArgs, AcceptsOneCuSourceWithKnownOptions) {
  const std::vector<std::vector<std::string>> accepted = {
      {"-c", "k.cu", "-o", "k.o"},
      {"-c", "k.cu", "--output-file=k.o", "-Iinc", "-I", "inc2", "--include-path=inc3", "-isystem",
       "sys"},
      {"-c", "k.cu", "-o", "k.o", "-DX=1", "-D", "Y", "--define-macro=Z", "-UW", "-U", "V", "-O3",
       "-O", "2"},
      {"-c", "k.cu", "-o", "k.o", "-arch=sm_90", "-arch", "sm_80", "--gpu-architecture=compute_90",
       "-code=sm_90"},
      {"-c", "k.cu", "-gencode", "arch=compute_80,code=sm_80",
       "--generate-code=arch=compute_90,code=sm_90"},
      {"-c", "k.cu", "-std=c++17", "--std", "c++20", "-Xcompiler", "-fPIC,-O2,-Wall",
       "--compiler-options=-g"},
      {"-c", "k.cu", "-lineinfo", "--generate-line-info", "-G", "-g", "--use_fast_math",
       "-use_fast_math", "-m64"},
      {"-c", "-x", "cu", "k.cpp", "-ccbin", "/usr/bin/g++", "--compiler-bindir=/usr/bin/gcc"},
      {"--compile", "k.cu", "--expt-relaxed-constexpr", "--extended-lambda", "-maxrregcount=32"},
  };
  for (const auto& args : accepted) {
    NvccArgs a = parse(args);
    EXPECT_EQ(a.refused_code, "") << args[1] << " " << a.refused;
  }
}

TEST(NvccArgs, OutputAsWrittenOrTheSourceStemInTheCwd) {
  EXPECT_EQ(parse({"-c", "k.cu", "-o", "out/k.o"}).output, "out/k.o");
  EXPECT_EQ(parse({"-c", "src/k.cu"}).output, "k.o");
  EXPECT_EQ(parse({"-c", "src/k.cu"}).source, "src/k.cu");
  EXPECT_EQ(parse({"-c", "-x", "cu", "k.cpp"}).output, "k.o");
}

TEST(NvccArgs, PassThroughReasons) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> refused = {
      {{"-c", "-rdc=true", "k.cu"}, "nvcc_unsupported_option:-rdc"},
      {{"-c", "--relocatable-device-code", "true", "k.cu"},
       "nvcc_unsupported_option:--relocatable-device-code"},
      {{"-dc", "k.cu"}, "nvcc_unsupported_option:-dc"},
      {{"--device-link", "k.o"}, "nvcc_unsupported_option:--device-link"},
      {{"-c", "k.cu", "-M"}, "nvcc_unsupported_option:-M"},
      {{"-c", "k.cu", "-MD"}, "nvcc_unsupported_option:-MD"},
      {{"-E", "k.cu"}, "nvcc_unsupported_option:-E"},
      {{"-ptx", "k.cu"}, "nvcc_unsupported_option:-ptx"},
      {{"-cubin", "k.cu"}, "nvcc_unsupported_option:-cubin"},
      {{"-fatbin", "k.cu"}, "nvcc_unsupported_option:-fatbin"},
      {{"-c", "k.cu", "--keep"}, "nvcc_unsupported_option:--keep"},
      {{"-c", "k.cu", "-keep"}, "nvcc_unsupported_option:-keep"},
      {{"-c", "k.cu", "-odir", "d"}, "nvcc_unsupported_option:-odir"},
      {{"-c", "k.cu", "-Xptxas", "-v"}, "nvcc_unsupported_option:-Xptxas"},
      {{"-c", "k.cu", "--options-file", "f"}, "nvcc_unsupported_option:--options-file"},
      {{"-c", "k.cu", "@opts"}, "nvcc_unsupported_option:@file"},
      {{"-c", "k.cu", "-v"}, "nvcc_unsupported_option:-v"},
      {{"-c", "k.cu", "--dryrun"}, "nvcc_unsupported_option:--dryrun"},
      {{"-c", "k.cu", "-lineinfo=1"}, "nvcc_unsupported_option:-lineinfo"},
      {{"-c", "k.cu", "-Xcompiler", "-fPIC,-MD"}, "nvcc_unsupported_option:-Xcompiler=-MD"},
      {{"-c", "k.cu", "-Xcompiler", "-fplugin=x.so"},
       "nvcc_unsupported_option:-Xcompiler=-fplugin=x.so"},
      {{"-c", "k.cu", "-Xcompiler", "-Wp,-MD,x"}, "nvcc_unsupported_option:-Xcompiler=-Wp"},
      {{"-c", "k.cu", "-Xcompiler", "-w"}, "nvcc_unsupported_option:-Xcompiler=-w"},
      {{"-c", "k.cu", "-Xcompiler", "-include,x.h"}, "nvcc_unsupported_option:-Xcompiler=-include"},
      {{"-c", "k.cu", "-Xcompiler", "-fPIC,"}, "nvcc_unsupported_option:-Xcompiler="},
      {{"-c", "k.cu", "-Xcompiler", "-flto"}, "nvcc_unsupported_option:-Xcompiler=-flto"},
      {{"-c", "k.cu", "-Xcompiler", "-O2,-march=native"},
       "nvcc_unsupported_option:-Xcompiler=-march=native"},
      {{"-c", "k.cu", "-Xcompiler", "-mtune=native"},
       "nvcc_unsupported_option:-Xcompiler=-mtune=native"},
      {{"-c", "k.cu", "-Xcompiler", "-fdirectives-only"},
       "nvcc_unsupported_option:-Xcompiler=-fdirectives-only"},
      {{"-c", "k.cu", "-o"}, "option_missing_value:-o"},
      {{"-c", "k.cu", "-o", "-"}, "output_to_stdout"},
      {{"-c", "k.cu", "-o", "a.o", "-o", "b.o"}, "nvcc_unsupported_option:-o"},
      {{"-c", "-"}, "stdin_input"},
      {{"k.cu", "-o", "k"}, "nvcc_not_compile"},
      {{"-c"}, "no_source"},
      {{"-c", "a.cu", "b.cu"}, "multiple_sources"},
      {{"-c", "k.cpp"}, "unknown_input_language"},
      {{"-c", "-x", "c++", "k.cu"}, "unsupported_language:c++"},
      {{"-c", "k.cu", "-arch=native"}, "nvcc_arch_native"},
      {{"-c", "k.cu", "-arch", "native"}, "nvcc_arch_native"},
      {{"-c", "k.cu", "--gpu-architecture=native"}, "nvcc_arch_native"},
      {{"-c", "k.cu", "-gencode", "arch=native,code=native"}, "nvcc_arch_native"},
  };
  for (const auto& [args, code] : refused) {
    NvccArgs a = parse(args);
    EXPECT_EQ(a.refused_code, code) << args[0] << " " << args.back();
    EXPECT_FALSE(a.refused.empty());
  }
}

}  // namespace
}  // namespace ccpool::compiler
