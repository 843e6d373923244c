#include "compiler/cc_name.h"

namespace ccpool::compiler {
namespace {

constexpr std::string_view kDrivers[] = {"gcc", "g++", "cc", "c++", "clang", "clang++"};

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

bool is_triplet_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || is_digit(c) || c == '_' || c == '.';
}

// "" or "-" followed by digits, then any number of "." + digits.
bool is_version_suffix(std::string_view s) {
  if (s.empty()) return true;
  if (s[0] != '-') return false;
  bool need_digit = true;
  for (char c : s.substr(1)) {
    if (is_digit(c)) {
      need_digit = false;
    } else if (c == '.' && !need_digit) {
      need_digit = true;
    } else {
      return false;
    }
  }
  return !need_digit;
}

}  // namespace

// The prefix before the driver name must be ([A-Za-z0-9_.]+-)*: every
// candidate start is 0 or just after a '-', and the part before it is valid
// while no '-' starts a segment and every other char is a triplet char.
bool is_cc_name(std::string_view name) {
  bool prefix_ok = true;  // name[0, start) is in ([A-Za-z0-9_.]+-)*
  for (size_t start = 0; start < name.size() && prefix_ok; ++start) {
    if (start == 0 || name[start - 1] == '-') {
      std::string_view rest = name.substr(start);
      for (std::string_view driver : kDrivers) {
        if (rest.substr(0, driver.size()) == driver &&
            is_version_suffix(rest.substr(driver.size()))) {
          return true;
        }
      }
    }
    char c = name[start];
    bool segment_start = start == 0 || name[start - 1] == '-';
    prefix_ok = is_triplet_char(c) || (c == '-' && !segment_start);
  }
  return false;
}

}  // namespace ccpool::compiler
