// Test-only fault injection, in the spirit of SIMULATE_OOM_RANK: a seam in
// the shape of leveldb's fault-injection Env. The components that can fail on
// purpose (cache::Store, pool::ProcessRunner, service::ExecPipeline) are
// handed a FaultInjector at construction; production hands them none() unless
// the program's own main read a spec (the CLI reads CCPOOL_FAULT). Nothing
// below main reads the environment for it.
//
// A spec is a comma-separated list of rules; empty means off, and the
// service logs a loud warning at start when it is on:
//   kill_exec=N          SIGKILL the Nth tool execution right after spawn (1-based)
//   delay_reply=M:MS     delay the Mth reply sent to a client by MS milliseconds
//   fail_store_write=N   fail the Nth store write (0 = every write)
//   delay_exec=MS        sleep MS before each execution (widens race windows)
//   throw_in_request=N   the Nth request's arena work throws (0 = every request)
//   throw_in_start=N     the Nth job start throws (0 = every start)
//   delay_finish=MS      hold each finished execution MS before its result is
//                        collected: its flight stays joinable with its tool gone
//   drop_fs_events=1     the validation memo reads and drops every inotify event
//                        (a filesystem that reports no changes)
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace ccpool {

class FaultInjector {
 public:
  // The injector that injects nothing: what components use unless given one.
  static FaultInjector& none();
  // Thread-safe after construction; counts only when enabled().
  explicit FaultInjector(const std::string& spec);
  FaultInjector(const FaultInjector&) = delete;
  FaultInjector& operator=(const FaultInjector&) = delete;

  bool enabled() const { return m_enabled; }
  const std::string& spec() const { return m_spec; }

  bool should_kill_exec();         // counts executions
  int64_t reply_delay_ms();        // counts replies; 0 when no delay
  bool should_fail_store_write();  // counts store writes
  int64_t exec_delay_ms() const { return m_delay_exec_ms; }
  bool should_throw_in_request();  // counts requests
  bool should_throw_in_start();    // counts job starts
  int64_t finish_delay_ms() const { return m_delay_finish_ms; }
  bool drops_fs_events() const { return m_drop_fs_events; }

 private:
  std::string m_spec;
  bool m_enabled = false;
  int64_t m_kill_exec = -1;
  int64_t m_delay_reply_index = -1;
  int64_t m_delay_reply_ms = 0;
  int64_t m_fail_store_write = -1;
  int64_t m_delay_exec_ms = 0;
  int64_t m_throw_in_request = -1;
  int64_t m_throw_in_start = -1;
  std::atomic<int64_t> m_request_count{0};
  std::atomic<int64_t> m_start_count{0};
  int64_t m_delay_finish_ms = 0;
  bool m_drop_fs_events = false;
  std::atomic<int64_t> m_exec_count{0};
  std::atomic<int64_t> m_reply_count{0};
  std::atomic<int64_t> m_store_write_count{0};
};

}  // namespace ccpool
