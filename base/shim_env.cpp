#include "base/shim_env.h"

namespace ccpool {
namespace {

// "libccpool-shim.so" or ".../libccpool-shim.so", nothing else.
bool names_shim(std::string_view entry) {
  if (entry.size() < kShimName.size()) return false;
  std::string_view tail = entry.substr(entry.size() - kShimName.size());
  if (tail != kShimName) return false;
  return entry.size() == kShimName.size() || entry[entry.size() - kShimName.size() - 1] == '/';
}

}  // namespace

std::string strip_shim_from_preload(std::string_view value) {
  std::string out;
  size_t start = 0;
  while (start <= value.size()) {
    size_t end = value.find_first_of(": ", start);
    if (end == std::string_view::npos) end = value.size();
    std::string_view entry = value.substr(start, end - start);
    if (!entry.empty() && !names_shim(entry)) {
      if (!out.empty()) out.push_back(':');
      out.append(entry);
    }
    start = end + 1;
  }
  return out;
}

std::vector<std::string> environment_without_shim(const std::vector<std::string>& env) {
  std::vector<std::string> out;
  out.reserve(env.size());
  constexpr std::string_view kPreload = "LD_PRELOAD=";
  for (const std::string& entry : env) {
    if (entry.compare(0, kPreload.size(), kPreload) != 0) {
      out.push_back(entry);
      continue;
    }
    std::string kept = strip_shim_from_preload(std::string_view(entry).substr(kPreload.size()));
    if (!kept.empty()) out.push_back(std::string(kPreload) + kept);
  }
  return out;
}

}  // namespace ccpool
