// The default memory budget, read from the kernel.
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>

#include "pool/scheduler.h"

namespace ccpool::pool {
namespace {

constexpr uint64_t kNoLimit = ~uint64_t{0};

// "MemAvailable:   12345 kB" -> bytes; 0 when unreadable.
uint64_t mem_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  uint64_t value = 0;
  while (in >> key >> value) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return value * 1024;
  }
  return 0;
}

// A limit file holds a byte count, "max" (v2) or a huge number (v1, unlimited).
uint64_t read_limit_file(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return kNoLimit;
  uint64_t value = std::strtoull(text.c_str(), nullptr, 10);
  return (value == 0 || value >= (uint64_t{1} << 60)) ? kNoLimit : value;
}

// The effective cgroup limit is the smallest along the path to the root.
uint64_t min_limit_up_the_tree(const std::string& root, std::string rel, const std::string& file) {
  uint64_t limit = kNoLimit;
  for (;;) {
    limit = std::min(limit, read_limit_file(root + rel + "/" + file));
    if (rel.empty() || rel == "/") break;
    rel = rel.substr(0, rel.rfind('/'));
  }
  return limit;
}

// /proc/self/cgroup lines: "0::/path" (v2) or "N:memory,...:/path" (v1).
uint64_t cgroup_memory_limit() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  uint64_t limit = kNoLimit;
  while (std::getline(in, line)) {
    size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    if (path == "/") path.clear();
    if (controllers.empty()) {
      limit = std::min(limit, min_limit_up_the_tree("/sys/fs/cgroup", path, "memory.max"));
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      limit = std::min(
          limit, min_limit_up_the_tree("/sys/fs/cgroup/memory", path, "memory.limit_in_bytes"));
    }
  }
  return limit;
}

}  // namespace

uint64_t default_mem_budget() {
  uint64_t budget = mem_available_bytes() / 10 * 8;
  uint64_t cgroup = cgroup_memory_limit();
  if (budget == 0) budget = cgroup;
  budget = std::min(budget, cgroup);
  // Nothing readable at all: fall back to a modest fixed budget.
  return budget == kNoLimit || budget == 0 ? (4ull << 30) : budget;
}

}  // namespace ccpool::pool
