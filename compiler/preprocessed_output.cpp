// What the -E output of nvcc's host-compiler steps says (nvcc_manifest.cpp):
// the files its line markers name, and whether it determines the result.
#include "compiler/preprocessed_output.h"

#include <algorithm>
#include <set>

#include "compiler/source_scan.h"

namespace ccpool::compiler {

std::set<std::string> marker_files(const std::string& text) {
  std::set<std::string> files;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    if (end - pos > 4 && text[pos] == '#' && text[pos + 1] == ' ' && text[pos + 2] >= '0' &&
        text[pos + 2] <= '9') {
      size_t q = text.find('"', pos);
      if (q != std::string::npos && q < end) {
        std::string name;
        size_t i = q + 1;
        for (; i < end && text[i] != '"'; ++i) {
          if (text[i] == '\\' && i + 1 < end) {
            char c = text[++i];
            if (c >= '0' && c <= '7') {
              int v = 0;
              for (int k = 0; k < 3 && i < end && text[i] >= '0' && text[i] <= '7'; ++k, ++i) {
                v = v * 8 + (text[i] - '0');
              }
              --i;
              name += static_cast<char>(v);
            } else {
              name += c;
            }
          } else {
            name += text[i];
          }
        }
        if (!name.empty() && name[0] != '<') files.insert(name);
      }
    }
    pos = end + 1;
  }
  return files;
}

WhyNot unsafe_preprocessed(const HelperOutput& out, bool sde_pinned) {
  bool date_time = out.err.find("[-Wdate-time]") != std::string::npos;
  if (date_time && (!sde_pinned || out.err.find("\"__TIMESTAMP__\"") != std::string::npos)) {
    return {"date_time_macro",
            "__TIME__, __DATE__ or __TIMESTAMP__ expanded (-E does not determine them)"};
  }
  if (out.out.find("date-time") != std::string::npos) {
    return {"date_time_macro", "a pragma names -Wdate-time: its warning cannot be trusted"};
  }
  if (out.out.find("incbin") != std::string::npos) return {"incbin", "incbin in the -E output"};
  if (has_asm_directive(out.out, ".include"))
    return {"asm_include", "assembler .include in the -E output"};
  return {};
}

}  // namespace ccpool::compiler
