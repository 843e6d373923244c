// Peak memory of a piece of code, for tests that bound what a decoder may
// allocate. Linux resets a process's peak RSS (VmHWM) when "5" is written to
// /proc/self/clear_refs; the growth is the new peak minus the RSS before.
// Other threads of the test process count too, so bounds should leave a few
// MiB of room.
#pragma once

#include <cstdint>
#include <fstream>
#include <functional>
#include <string>

namespace ccpool::testing {

// kB value of one field of /proc/self/status ("VmRSS", "VmHWM"); 0 if absent.
inline uint64_t proc_status_kb(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, field.size() + 1, field + ":") == 0)
      return std::stoull(line.substr(field.size() + 1));
  }
  return 0;
}

// Bytes by which the peak RSS rose while `fn` ran; UINT64_MAX when the peak
// cannot be reset (the caller should then skip with exit code 125).
inline uint64_t peak_rss_growth(const std::function<void()>& fn) {
  {
    std::ofstream reset("/proc/self/clear_refs");
    reset << "5";
    reset.flush();
    if (!reset) return UINT64_MAX;
  }
  uint64_t before = proc_status_kb("VmRSS");
  fn();
  uint64_t peak = proc_status_kb("VmHWM");
  return peak > before ? (peak - before) * 1024 : 0;
}

}  // namespace ccpool::testing
