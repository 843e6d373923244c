#include "service/delivery.h"

#include <cstdio>
#include <cstdlib>

#include "base/fs.h"
#include "base/process.h"

namespace ccpool::service {

uint32_t delivered_mode(uint32_t stored_mode, uint32_t umask) {
  uint32_t base = (stored_mode & 0111) ? 0777 : 0666;
  return base & ~umask & 0777;
}

uint64_t fairness_id(int32_t rank, pid_t client_pid) {
  if (rank >= 0) return static_cast<uint64_t>(rank) + 1;
  pid_t ppid = parent_pid(client_pid);
  if (ppid > 0) return (1ull << 32) | static_cast<uint64_t>(ppid);
  return (2ull << 32) | static_cast<uint64_t>(client_pid);
}

std::string summarize_argv(const std::vector<std::string>& argv, size_t max_chars) {
  std::string out;
  for (const auto& arg : argv) {
    if (!out.empty()) out += ' ';
    out += arg;
    if (out.size() > max_chars) {
      out.resize(max_chars);
      out += "...";
      break;
    }
  }
  return out;
}

}  // namespace ccpool::service
