// Each test runs in its own scratch directory under $CCPOOL_TEST_TMP (default
// /tmp/ccpool-tests). It is deleted when the test passes and kept, with its
// path printed, when it fails.
#pragma once

#include <string>

namespace ccpool::testing {

// The current test's scratch directory; created on first use.
const std::string& scratch_dir();

// Absolute path of a file in the build tree's bin dir (e.g. "ccpool").
std::string build_binary(const std::string& name);

}  // namespace ccpool::testing
