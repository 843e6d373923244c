// Classification table: command line -> cacheable (mode) or pass-through.
#include "compiler/cc_args.h"

#include <gtest/gtest.h>

#include "tests/compiler/executor.h"
#include "tests/support/scratch.h"

namespace ccpool::compiler {
namespace {

struct Row {
  std::string line;
  std::string refused;  // "" = cacheable; else a substring of the reason
  CcMode mode = CcMode::kCompile;
};

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out = {"g++"};
  size_t i = 0;
  while (i < line.size()) {
    size_t j = line.find(' ', i);
    if (j == std::string::npos) j = line.size();
    if (j > i) out.push_back(line.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

TEST(CcArgs, ClassificationTable) {
  const std::vector<Row> rows = {
      {"-c k.cpp -o k.o", ""},
      {"-c k.c", ""},
      {"-S k.cpp -o k.s", "", CcMode::kAssemble},
      {"k.cpp -shared -fPIC -O3 -march=native -fopenmp -o k.so -lgomp", "", CcMode::kLink},
      {"k.cpp -o k", "", CcMode::kLink},
      {"-c k.cpp -I inc -isystem sys -iquote q -idirafter late -DX=1 -UY -O2 -g", ""},
      {"-c k.cpp -Iinc -DX -std=c++17 -Wall -Werror -fno-exceptions -mavx2", ""},
      {"-c k.cpp -MD -MF k.d -MT t -MP -o k.o", ""},
      {"-c k.cpp -MD -o k.o", ""},
      {"-c -x c++ k.txt -o k.o", ""},
      {"-c k.ii -o k.o", ""},
      {"-c k.cpp -gsplit-dwarf -o k.o", ""},
      {"-c k.cpp --coverage -o k.o", ""},
      {"-c k.cpp -fstack-usage -o k.o", ""},
      {"-c k.cpp -fdebug-prefix-map=/a=/b -g", ""},
      {"k.cpp -shared -Wl,-rpath,/opt/lib -Wl,--as-needed -o k.so", "", CcMode::kLink},
      {"a.cpp b.cpp -c", "several sources"},
      {"a.o b.o -o prog", "link inputs"},
      {"-shared -o k.so k.o", "link inputs"},
      {"-o prog", "no source"},
      {"-E k.cpp", "-E"},
      {"-M k.cpp", "-M"},
      {"-MM k.cpp", "-MM"},
      {"-c k.cpp -MMD", ""},
      {"-c k.cpp -MMD -MP -MT t -MF k.d -o k.o", ""},
      {"-c k.cpp -MP -o k.o", "without -MD"},
      {"-c k.cpp -o -", "-o -"},
      {"-x c -c -", "stdin"},
      {"-c k.cpp -save-temps", "-save-temps"},
      {"-c k.h -o k.gch", "unknown language"},
      {"-x c++-header -c k.h", "c++-header"},
      {"-c k.cpp --frobnicate", "--frobnicate"},
      {"-c k.cpp -Zweird", "-Zweird"},
      {"-c k.cpp -fplugin=x.so", "-fplugin"},
      {"-c k.cpp -fprofile-use=p", "-fprofile-use"},
      {"-c k.cpp -Xclang -foo", "-Xclang"},
      {"-c k.cpp -Wp,-MD,x.d", "-Wp,"},
      {"-c k.cpp -v", "-v"},
      {"k.cpp -shared -Wl,--version-script=v.map -o k.so", "linker option"},
      {"k.cpp -shared -T script.ld -o k.so", "-T"},
      {"k.cpp -MD -o k", "outside -c"},
      {"k.cpp -MMD -o k", "outside -c"},
      {"-c k.cpp -MF k.d", "without -MD"},
      {"k.cpp -gsplit-dwarf -o k", "side outputs"},
      {"-c k.cpp -fuse-ld=lld", "-fuse-ld"},
      {"-c k.s", "unknown language"},
      {"-c k.cpp -o", "lacks its value"},
  };
  for (const Row& row : rows) {
    CcArgs a = parse_cc_args(split(row.line), "/tmp");
    if (row.refused.empty()) {
      EXPECT_EQ(a.refused, "") << row.line;
      EXPECT_EQ(a.mode, row.mode) << row.line;
    } else {
      EXPECT_NE(a.refused.find(row.refused), std::string::npos)
          << row.line << " -> '" << a.refused << "'";
    }
  }
}

// Stable reason codes (docs/cache-keys.md): counted per code by the service,
// so they are part of the interface.
TEST(CcArgs, RefusalsCarryStableReasonCodes) {
  const std::vector<std::pair<std::string, std::string>> rows = {
      {"-c k.cpp -o k.o", ""},
      {"a.cpp b.cpp -c", "multiple_sources"},
      {"a.o b.o -o prog", "link_inputs"},
      {"-o prog", "no_source"},
      {"-E k.cpp", "unsupported_option:-E"},
      {"-c k.cpp -Xfoo", "unknown_option:-Xfoo"},
      {"-c k.cpp --frobnicate=1", "unknown_option:--frobnicate"},
      {"-c k.cpp -fplugin=/x/y.so", "unsupported_option:-fplugin"},
      {"-c k.cpp -Wp,-MD,x.d", "unsupported_option:-Wp"},
      {"-x c -c -", "stdin_input"},
      {"-c k.cpp -o -", "output_to_stdout"},
      {"-x c++-header -c k.h", "unsupported_language:c++-header"},
      {"-c k.h -o k.gch", "unknown_input_language"},
      {"k.cpp -shared -Wl,--version-script=v.map -o k.so", "linker_option:--version-script"},
      {"-c k.cpp -Wa,-adhln=x.lst", "assembler_option:-adhln"},
      {"-c k.cpp -fuse-ld=lld", "linker_choice"},
      {"-c k.cpp -o", "option_missing_value:-o"},
      {"k.cpp -MD -o k", "depfile_outside_compile"},
      {"k.cpp -gsplit-dwarf -o k", "side_outputs_outside_compile"},
  };
  for (const auto& [line, code] : rows) {
    CcArgs a = parse_cc_args(split(line), "/tmp");
    EXPECT_EQ(a.refused_code, code) << line << " -> '" << a.refused << "'";
    EXPECT_EQ(a.refused.empty(), code.empty()) << line;
  }
  // Codes are bounded and printable whatever the command line holds.
  CcArgs long_option = parse_cc_args(split("-c k.cpp -X" + std::string(500, 'y')), "/tmp");
  EXPECT_LE(long_option.refused_code.size(), std::string("unknown_option:").size() + 48);
  CcArgs odd = parse_cc_args({"g++", "-c", "k.cpp", "-X\x01\xff"}, "/tmp");
  for (char c : odd.refused_code) EXPECT_TRUE(c > ' ' && c < 127) << odd.refused_code;
}

TEST(CcArgs, ResponseFilesExpandWithQuotes) {
  std::string dir = ::ccpool::testing::scratch_dir();
  compiler::testing::write_text(dir + "/a.rsp", "-c 'k 1.cpp' \"-DX=a b\" @b.rsp\n");
  compiler::testing::write_text(dir + "/b.rsp", "-O2 -o\\ x.o\n");
  CcArgs a = parse_cc_args({"g++", "@a.rsp"}, dir);
  ASSERT_EQ(a.refused, "");
  EXPECT_EQ(a.args, (std::vector<std::string>{"-c", "k 1.cpp", "-DX=a b", "-O2", "-o x.o"}));
  EXPECT_EQ(a.output, " x.o");
  EXPECT_NE(parse_cc_args({"g++", "@missing.rsp", "-c", "k.cpp"}, dir).refused, "");
}

}  // namespace
}  // namespace ccpool::compiler
