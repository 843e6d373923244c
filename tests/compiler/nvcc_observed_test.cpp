// The record's nvcc rule (compiler/observed.cpp, ObservedRun::nvcc) on
// synthetic records: what nvcc itself does that is no lookup (the listing of
// its temp dir at exit), the clock its front ends read at startup (allowed
// only while no file the run opened names a date macro), and what asks the
// GPU. The real runs are tests/torch/ptxas_test.py's NvccTest.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "compiler/observed.h"

namespace ccpool::compiler {
namespace {

namespace fs = std::filesystem;

class NvccObserved : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* base = std::getenv("CCPOOL_TEST_TMP");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/nvcc-observed.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root = tmpl;
    fs::create_directories(root + "/bin");
    fs::create_directories(root + "/tmp");
    fs::create_directories(root + "/work");
    for (const char* tool : {"nvcc", "cudafe++", "cicc", "gcc", "__nvcc_device_query"})
      put("bin/" + std::string(tool), std::string("image of ") + tool);
    put("k.h", "#define SCALE 2.0f\n");
  }
  void TearDown() override { fs::remove_all(root); }

  void put(const std::string& rel, const std::string& text) {
    std::ofstream(root + "/" + rel) << text;
  }

  static TraceEvent ev(char op, int64_t pid, int64_t a, int64_t b, std::string text) {
    TraceEvent e;
    e.op = op;
    e.pid = pid;
    e.a = a;
    e.b = b;
    e.text = std::move(text);
    return e;
  }

  // nvcc (pid 10) runs cudafe++ (pid 11), which reads the clock; nvcc reads
  // k.h, writes a temp file and lists the temp dir at exit.
  std::vector<TraceEvent> nvcc_run(const std::string& front_end = "cudafe++") {
    return {ev('S', 10, 1, 0, root + "/bin/nvcc"),
            ev('P', 10, 11, 0, root + "/bin/" + front_end),
            ev('S', 11, 10, 0, root + "/bin/" + front_end),
            ev('C', 11, 0, 0, "ctime"),
            ev('O', 10, 0, 0, root + "/k.h"),
            ev('W', 10, 0, 65, root + "/tmp/tmpxft_0000100e_00000000-1.ii"),
            ev('O', 11, 0, 0, root + "/tmp/tmpxft_0000100e_00000000-1.ii"),
            ev('D', 10, 0, 0, root + "/tmp")};
  }

  Observation conclude(const std::vector<TraceEvent>& events, bool nvcc) {
    ObservedRun run;
    run.cwd = root + "/work";
    run.work_dir = root + "/work/job";
    run.start_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count() +
                   10'000'000'000;
    run.nvcc = nvcc;
    return conclude_observed(hasher, listings, run, events);
  }

  std::string root;
  FileHasher hasher;
  DirListings listings;
};

TEST_F(NvccObserved, FrontEndClockAndTempListingAreNoLookupsOfNvcc) {
  Observation o = conclude(nvcc_run(), true);
  ASSERT_TRUE(o.why.empty()) << o.why.code << ": " << o.why.text;
  EXPECT_TRUE(o.entry.dirs.empty()) << "the temp dir's listing became a lookup";
  bool header = false;
  for (const auto& [path, digest] : o.entry.files) header |= path == root + "/k.h";
  EXPECT_TRUE(header);
  EXPECT_TRUE(conclude(nvcc_run("cicc"), true).why.empty());
}

TEST_F(NvccObserved, OutsideNvccTheClockAndTheListingCount) {
  Observation o = conclude(nvcc_run(), false);
  EXPECT_EQ(o.why.code, "time_macro");
  std::vector<TraceEvent> no_clock = nvcc_run();
  no_clock.erase(no_clock.begin() + 3);
  o = conclude(no_clock, false);
  ASSERT_TRUE(o.why.empty()) << o.why.code << ": " << o.why.text;
  EXPECT_EQ(o.entry.dirs.size(), 1u);
}

TEST_F(NvccObserved, ClockOfAnotherProgramOrListingByAnotherProcessCounts) {
  Observation o = conclude(nvcc_run("gcc"), true);  // gcc's localtime: __DATE__ expanded
  EXPECT_EQ(o.why.code, "time_macro");
  std::vector<TraceEvent> events = nvcc_run();
  events.push_back(ev('D', 11, 0, 0, root + "/tmp"));  // the front end lists it
  o = conclude(events, true);
  ASSERT_TRUE(o.why.empty()) << o.why.code << ": " << o.why.text;
  EXPECT_EQ(o.entry.dirs.size(), 1u);
}

TEST_F(NvccObserved, ADateMacroInAnOpenedFileRefusesTheFrontEndsClock) {
  for (const char* name : {"__DATE__", "__TIME__", "__TIMESTAMP__"}) {
    put("k.h", std::string("#undef ") + name + "\n");
    Observation o = conclude(nvcc_run(), true);
    EXPECT_EQ(o.why.code, "time_macro") << name;
  }
  put("k.h", "#define SCALE 2.0f\n");
  std::vector<TraceEvent> events = nvcc_run();
  events.erase(events.begin() + 3);  // no clock read: nothing to refuse
  put("k.h", "const char* t = __TIME__;\n");
  EXPECT_TRUE(conclude(events, true).why.empty());
}

TEST_F(NvccObserved, WhatAsksTheGpuIsRefused) {
  std::vector<std::vector<TraceEvent>> cases = {
      {ev('S', 12, 10, 0, root + "/bin/__nvcc_device_query")},
      {ev('O', 10, 0, 0, "/dev/nvidiactl")},
      {ev('O', 10, 2, 0, "/dev/nvidia0")},
      {ev('L', 10, 0, 0, "/usr/lib/x86_64-linux-gnu/libcuda.so.1")},
      {ev('O', 10, 2, 0, "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1")}};
  for (const auto& extra : cases) {
    std::vector<TraceEvent> events = nvcc_run();
    events.insert(events.end(), extra.begin(), extra.end());
    EXPECT_EQ(conclude(events, true).why.code, "nvcc_asks_gpu") << extra[0].text;
  }
}

}  // namespace
}  // namespace ccpool::compiler
