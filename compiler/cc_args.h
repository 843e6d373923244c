// Command-line classification for gcc/g++/clang/clang++: which commands are
// cacheable and what the planner needs to know about them. Anything not
// understood sets `refused` (pass-through); see docs/cache-keys.md.
#pragma once

#include <string>
#include <vector>

namespace ccpool::compiler {

enum class CcMode { kCompile, kAssemble, kLink };  // -c, -S, one-step link

struct CcArgs {
  std::string refused;            // non-empty: pass-through, with the reason (for humans)
  std::string refused_code;       // the stable reason code when refused (docs/cache-keys.md)
  std::vector<std::string> args;  // argv[1..] after @file expansion
  CcMode mode = CcMode::kLink;
  std::string language;     // "c", "c++" or "assembler-with-cpp" (.S)
  std::string source;       // as written
  size_t source_index = 0;  // index in args
  std::string output;       // as written; empty when absent
  size_t output_index = 0;  // index in args of the -o value, or of the joined -oFILE
  bool output_joined = false;
  // Dependency output asked for by the user (-MD or -MMD, -MF, -MT/-MQ, -MP).
  bool dep_md = false;                  // -MD or -MMD given
  bool dep_user_only = false;           // the last of them was -MMD: no system headers
  bool dep_phony = false;               // -MP
  std::vector<size_t> dep_mmd_indices;  // -MMD args (the run gets -MD instead)
  std::string dep_mf;                   // last -MF value
  std::vector<size_t> dep_mf_indices;   // args to drop when -MF is redirected
  bool dep_target = false;              // -MT or -MQ given
  // Things that decide whether cwd / the output path can reach the output.
  bool debug = false;  // -g* other than -g0
  bool split_dwarf = false, coverage = false, stack_usage = false;
  bool output_sensitive = false;  // -frecord-gcc-switches, -flto, profiling: keep -o in the key
  bool native = false;            // -march=native / -mtune=native / -mcpu=native
  std::vector<std::string> native_args;
  std::vector<std::string> prefix_maps;   // OLD=NEW of -fdebug-prefix-map / -ffile-prefix-map
  std::vector<std::string> include_args;  // args that shape the include search order
};

// Expands @files (gcc rules: whitespace-separated, '' "" and \ quoting,
// nested up to depth 10) and classifies. cwd resolves relative @files.
CcArgs parse_cc_args(const std::vector<std::string>& argv, const std::string& cwd);

}  // namespace ccpool::compiler
