#include "base/fault.h"

#include <cstdlib>
#include <sstream>

namespace ccpool {

FaultInjector& FaultInjector::none() {
  // Leaked on purpose: no static destructor in a long-lived process. Never
  // enabled, so it never counts: no state is shared through it.
  static FaultInjector* injector = new FaultInjector("");
  return *injector;
}

FaultInjector::FaultInjector(const std::string& spec) : m_spec(spec) {
  std::stringstream ss(spec);
  std::string rule;
  while (std::getline(ss, rule, ',')) {
    auto eq = rule.find('=');
    if (eq == std::string::npos) continue;
    std::string name = rule.substr(0, eq);
    std::string value = rule.substr(eq + 1);
    if (name == "kill_exec") {
      m_kill_exec = std::atoll(value.c_str());
    } else if (name == "delay_reply") {
      auto colon = value.find(':');
      m_delay_reply_index = std::atoll(value.substr(0, colon).c_str());
      if (colon != std::string::npos)
        m_delay_reply_ms = std::atoll(value.substr(colon + 1).c_str());
    } else if (name == "fail_store_write") {
      m_fail_store_write = std::atoll(value.c_str());
    } else if (name == "delay_exec") {
      m_delay_exec_ms = std::atoll(value.c_str());
    } else if (name == "throw_in_request") {
      m_throw_in_request = std::atoll(value.c_str());
    } else if (name == "throw_in_start") {
      m_throw_in_start = std::atoll(value.c_str());
    } else if (name == "delay_finish") {
      m_delay_finish_ms = std::atoll(value.c_str());
    } else if (name == "drop_fs_events") {
      m_drop_fs_events = std::atoll(value.c_str()) != 0;
    } else {
      continue;
    }
    m_enabled = true;
  }
}

bool FaultInjector::should_kill_exec() {
  if (!m_enabled) return false;
  int64_t n = ++m_exec_count;
  return m_kill_exec > 0 && n == m_kill_exec;
}

int64_t FaultInjector::reply_delay_ms() {
  if (!m_enabled) return 0;
  int64_t n = ++m_reply_count;
  return (m_delay_reply_index > 0 && n == m_delay_reply_index) ? m_delay_reply_ms : 0;
}

bool FaultInjector::should_fail_store_write() {
  if (!m_enabled) return false;
  int64_t n = ++m_store_write_count;
  return m_fail_store_write == 0 || (m_fail_store_write > 0 && n == m_fail_store_write);
}

bool FaultInjector::should_throw_in_request() {
  if (!m_enabled) return false;
  int64_t n = ++m_request_count;
  return m_throw_in_request == 0 || (m_throw_in_request > 0 && n == m_throw_in_request);
}

bool FaultInjector::should_throw_in_start() {
  if (!m_enabled) return false;
  int64_t n = ++m_start_count;
  return m_throw_in_start == 0 || (m_throw_in_start > 0 && n == m_throw_in_start);
}

}  // namespace ccpool
