#include "base/units.h"

#include <cctype>
#include <cmath>
#include <cstdio>

namespace ccpool {
namespace {

// Splits "12.5GiB" into 12.5 and "GiB". Returns false when no number leads.
bool split_number(std::string_view text, double& number, std::string& suffix) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  if (i == 0) return false;
  std::string num(text.substr(0, i));
  char* end = nullptr;
  number = std::strtod(num.c_str(), &end);
  if (end == nullptr || *end != '\0') return false;
  suffix.clear();
  for (char c : text.substr(i)) {
    if (c != ' ') suffix.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return true;
}

}  // namespace

Result<uint64_t> parse_size(std::string_view text) {
  double number;
  std::string suffix;
  if (!split_number(text, number, suffix)) {
    return make_error(ErrorCode::kInvalidArgument,
                      "invalid size '" + std::string(text) + "'; use e.g. 512M, 10G or 1048576");
  }
  double scale;
  if (suffix.empty() || suffix == "b")
    scale = 1;
  else if (suffix == "k" || suffix == "kb" || suffix == "kib")
    scale = 1024.0;
  else if (suffix == "m" || suffix == "mb" || suffix == "mib")
    scale = 1024.0 * 1024;
  else if (suffix == "g" || suffix == "gb" || suffix == "gib")
    scale = 1024.0 * 1024 * 1024;
  else if (suffix == "t" || suffix == "tb" || suffix == "tib")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else {
    return make_error(ErrorCode::kInvalidArgument, "invalid size unit in '" + std::string(text) +
                                                       "'; use K, M, G or T (powers of 1024)");
  }
  return static_cast<uint64_t>(std::llround(number * scale));
}

Result<std::chrono::milliseconds> parse_duration(std::string_view text) {
  double number;
  std::string suffix;
  if (!split_number(text, number, suffix)) {
    return make_error(ErrorCode::kInvalidArgument, "invalid duration '" + std::string(text) +
                                                       "'; use e.g. 250ms, 30s, 5m, 1h or 7d");
  }
  double ms;
  if (suffix == "ms")
    ms = number;
  else if (suffix.empty() || suffix == "s")
    ms = number * 1000;
  else if (suffix == "m" || suffix == "min")
    ms = number * 60'000;
  else if (suffix == "h")
    ms = number * 3'600'000;
  else if (suffix == "d")
    ms = number * 86'400'000;
  else {
    return make_error(ErrorCode::kInvalidArgument,
                      "invalid duration unit in '" + std::string(text) + "'; use ms, s, m, h or d");
  }
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(ms)));
}

std::string format_size(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char buf[32];
  if (unit == 0)
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else
    std::snprintf(buf, sizeof buf, "%.1f %s", value, kUnits[unit]);
  return buf;
}

std::string format_duration(std::chrono::milliseconds d) {
  int64_t ms = d.count();
  char buf[48];
  if (ms < 1000)
    std::snprintf(buf, sizeof buf, "%lld ms", static_cast<long long>(ms));
  else if (ms < 60'000)
    std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ms) / 1000);
  else if (ms < 3'600'000)
    std::snprintf(buf, sizeof buf, "%lldm %llds", static_cast<long long>(ms / 60'000),
                  static_cast<long long>(ms / 1000 % 60));
  else if (ms < 86'400'000)
    std::snprintf(buf, sizeof buf, "%lldh %lldm", static_cast<long long>(ms / 3'600'000),
                  static_cast<long long>(ms / 60'000 % 60));
  else
    std::snprintf(buf, sizeof buf, "%lldd %lldh", static_cast<long long>(ms / 86'400'000),
                  static_cast<long long>(ms / 3'600'000 % 24));
  return buf;
}

}  // namespace ccpool
