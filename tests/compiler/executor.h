// A tiny in-test executor standing in for the service: plan -> lookup ->
// (run run_argv in the work dir -> finish -> store) -> deliver. Results live
// in memory, keyed by result key.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "compiler/planner.h"

namespace ccpool::compiler::testing {

struct Record {
  std::map<std::string, std::string> files;  // output name -> bytes
  std::string stdout_text, stderr_text;
};

struct MemoryStore {
  std::map<Digest, Record> results;
  std::map<Digest, std::string> manifests;
  int executions = 0;
  int hits = 0;
  int passthroughs = 0;
  size_t manifest_loads = 0;  // load() calls that found a manifest
  ManifestStorage storage();
};

struct Outcome {
  Plan plan;
  bool hit = false;
  bool stored = false;
  std::string why_not;
  std::string why_not_code;
  KeyMode mode = KeyMode::kExact;  // when stored
  int exit_code = 0;
  std::string stdout_text, stderr_text;
  std::string trace;      // the run's record (libccpool-trace.so), when it ran traced
  Conclusion conclusion;  // what conclude() said, when it ran
};

// Runs `request` through planner and store like the service would. The hook
// runs between the tool's exit and finish() (to simulate edits during a
// compile).
Outcome execute(Planner& planner, MemoryStore& store, const Request& request,
                const std::function<void()>& before_finish = {});

// Runs argv directly (the reference compile). Returns the exit code.
int run_direct(const std::vector<std::string>& argv, const std::string& cwd,
               const std::vector<std::string>& env, std::string* err = nullptr,
               std::string* out = nullptr);

std::string read_text(const std::string& path);
void write_text(const std::string& path, const std::string& text);
std::vector<std::string> base_env();

}  // namespace ccpool::compiler::testing
