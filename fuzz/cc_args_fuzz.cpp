// libFuzzer target for gcc/clang command-line classification with @file
// expansion (compiler/cc_args.cpp). The input is argv (one argument per line)
// up to a line "%%", then the text of the response file "r" in a private
// directory, which argv and the file itself may name as "@r" (recursion and
// fan-out included). Checks: no crash, indices point into args, and a
// classified command names its source.
//
// Replay: the `fuzz.cc_args_fuzz` CTest test. Long run: docs/fuzzing.md.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "compiler/cc_args.h"

namespace {

void check(bool condition) {
  if (!condition) __builtin_trap();
}

// A private directory, in memory when /dev/shm exists (a file write per input
// on a disk would dominate the run).
const std::string& work_dir() {
  static auto* dir = [] {
    char shm[] = "/dev/shm/ccpool-cc-args-fuzz.XXXXXX";
    char tmp[] = "/tmp/ccpool-cc-args-fuzz.XXXXXX";
    const char* made = mkdtemp(shm);
    if (!made) made = mkdtemp(tmp);
    auto* path = new std::string(made ? made : "/tmp");
    if (made) {
      std::atexit([] {
        std::remove((work_dir() + "/r").c_str());
        ::rmdir(work_dir().c_str());
      });
    }
    return path;
  }();
  return *dir;
}

// Writes the response file only when its text changes.
void write_response(const std::string& text) {
  static auto* last = new std::string("\x01 never written");
  if (*last == text) return;
  std::string path = work_dir() + "/r";
  if (std::FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
    *last = text;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ccpool::compiler;
  std::string in(reinterpret_cast<const char*>(data), size);
  std::string response;
  size_t split = in.find("\n%%\n");
  if (split != std::string::npos) {
    response = in.substr(split + 4);
    in.resize(split);
  }
  std::vector<std::string> argv = {"gcc"};
  size_t pos = 0;
  while (pos <= in.size() && argv.size() < 256) {
    size_t eol = in.find('\n', pos);
    if (eol == std::string::npos) eol = in.size();
    argv.push_back(in.substr(pos, eol - pos));
    pos = eol + 1;
  }
  write_response(response);
  CcArgs args = parse_cc_args(argv, work_dir());
  if (args.refused.empty()) {
    check(args.source_index < args.args.size() && args.args[args.source_index] == args.source);
    if (!args.output.empty()) check(args.output_index < args.args.size());
    for (size_t i : args.dep_mf_indices) check(i < args.args.size());
  }
  return 0;
}
