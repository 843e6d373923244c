#include "base/process_facts.h"

#include <sched.h>
#include <unistd.h>

#include <charconv>
#include <climits>
#include <cstdlib>

namespace ccpool {

std::optional<std::string> env_value(const std::vector<std::string>& env, std::string_view name) {
  for (const std::string& entry : env) {
    if (entry.size() > name.size() && entry[name.size()] == '=' &&
        entry.compare(0, name.size(), name) == 0) {
      return entry.substr(name.size() + 1);
    }
  }
  return std::nullopt;
}

std::optional<std::string> own_env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

std::string own_executable() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  return std::string(buf, static_cast<size_t>(n));
}

std::string own_executable_dir() {
  std::string exe = own_executable();
  size_t slash = exe.rfind('/');
  return slash == std::string::npos ? "" : exe.substr(0, slash);
}

int available_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 && n <= INT_MAX ? static_cast<int>(n) : 1;
}

Result<int> parse_jobs(std::string_view text, std::string_view origin) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  bool digits_only =
      !text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos;
  if (digits_only && ec == std::errc() && end == text.data() + text.size() && value > 0 &&
      value <= kMaxJobs) {
    return value;
  }
  std::string name(origin);
  std::string what = "'" + std::string(text) + "' is not a positive whole number (1-" +
                     std::to_string(kMaxJobs) + ")";
  if (name.starts_with("--")) {
    return make_error(ErrorCode::kInvalidArgument,
                      name + " " + what + "; give a number of slots, e.g. " + name + " 8");
  }
  return make_error(ErrorCode::kInvalidArgument,
                    name + "=" + what + "; unset it or set a number of slots, e.g. " + name + "=8");
}

Result<int> jobs_setting(std::string_view flag, std::string_view ccpool_jobs) {
  if (!flag.empty()) return parse_jobs(flag, "--jobs");
  if (!ccpool_jobs.empty()) return parse_jobs(ccpool_jobs, "CCPOOL_JOBS");
  return 0;
}

}  // namespace ccpool
