// Fixture for the shim's real-process tests: a scratch PATH dir holding a fake
// compiler `g++` (prints "REAL <args>") and a fake ccpool-client that appends
// its argv to a record file (one argument per line, "---" after each call).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/shim/child_process.h"
#include "tests/support/scratch.h"

namespace ccpool::testing {

class ShimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = scratch_dir();
    m_bin = m_dir + "/bin";
    ::mkdir(m_bin.c_str(), 0755);
    m_record = m_dir + "/record";
    m_client = m_dir + "/fake-client";
    write_text(m_bin + "/g++", "#!/bin/sh\necho REAL g++ \"$@\"\n", 0755);
    // One append (one write(2)) per call, so parallel calls (make -j4) never
    // interleave their lines.
    write_text(m_client,
               "#!/bin/sh\nrec=$(for a in \"$@\"; do printf '%s\\n' \"$a\"; done; echo ---)\n"
               "printf '%s\\n' \"$rec\" >> '" +
                   m_record + "'\necho CLIENT\n",
               0755);
  }

  std::string shim() const { return build_binary("../lib/libccpool-shim.so"); }
  std::string probe() const { return build_binary("shim_exec_probe"); }

  EnvVars env(bool preload = true) const {
    EnvVars e{{"PATH", m_bin + ":/usr/bin:/bin"}, {"CCPOOL_CLIENT", m_client}, {"LANG", "C"}};
    if (preload) e["LD_PRELOAD"] = shim();
    return e;
  }

  // Calls the client recorded, in order.
  std::vector<std::vector<std::string>> calls() const {
    std::vector<std::vector<std::string>> out(1);
    std::string text = slurp(m_record);
    size_t start = 0;
    while (start < text.size()) {
      size_t nl = text.find('\n', start);
      std::string line = text.substr(start, nl - start);
      start = nl == std::string::npos ? text.size() : nl + 1;
      if (line == "---") {
        out.emplace_back();
      } else {
        out.back().push_back(line);
      }
    }
    out.pop_back();
    return out;
  }

  std::string m_dir, m_bin, m_record, m_client;
};

}  // namespace ccpool::testing
