// Single-flight for keys computed outside ccpool (Inductor's FX graphs,
// AOTAutograd entries, Triton kernels): the first client to miss a key leads
// (it computes the value and SETs it); the clients that miss it meanwhile wait
// for that SET instead of computing the same value again.
//
// Semantics (docs/resp-front.md, "Leases"):
//   acquire(key)  the key has no value: no lease on it -> the caller leads
//                 (kLead); a lease held by another owner -> the caller waits
//                 (kWait) and its waiter runs exactly once, with the value when
//                 a SET of the key lands, or with nullopt when the leader gives
//                 up (release, its connection closes) or the wait's deadline
//                 passes. A waiter never inherits the lease: it computes the
//                 value itself, so one hung leader costs each waiter at most
//                 its bound.
//   stored(key)   a value for key was stored (by anyone): the lease ends and
//                 every waiter gets the value (read once, through `value`).
//   release/release_all  the owner gives the lease up; waiters get nullopt.
//
// Thread-safety: every member may be called from any thread. Waiters run with
// no lock held, on the thread that ended the wait (a front loop, the store's
// committer, or the table's deadline thread): they must be cheap and must not
// call back into the table.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/thread_annotations.h"

namespace ccpool::resp {

struct LeaseStats {
  uint64_t leads = 0;         // leases granted
  uint64_t waits = 0;         // waits started
  uint64_t served = 0;        // waits ended by the leader's value
  uint64_t abandoned = 0;     // waits ended because the leader gave up (released, disconnected)
  uint64_t timed_out = 0;     // waits ended by their deadline
  size_t keys_in_flight = 0;  // leases held now
  size_t waiting = 0;         // waiters now
};

class LeaseTable {
 public:
  using Waiter = std::function<void(std::optional<std::string> value)>;
  using Clock = std::chrono::steady_clock;
  enum class Outcome { kLead, kWait };

  LeaseTable();
  ~LeaseTable();  // ends every wait with nullopt, joins the deadline thread
  LeaseTable(const LeaseTable&) = delete;
  LeaseTable& operator=(const LeaseTable&) = delete;

  // The caller found no value for `key`. An owner that already holds the lease
  // leads again. `waiter` is kept only for kWait.
  Outcome acquire(const std::string& key, uint64_t owner, Clock::time_point deadline,
                  Waiter waiter);
  // A value for `key` was stored. `value` is called (once, outside the lock)
  // only when someone waits; nullopt from it ends the waits as abandoned.
  void stored(std::string_view key, const std::function<std::optional<std::string>()>& value);
  // true when `owner` held the lease on `key` (it is gone now).
  bool release(std::string_view key, uint64_t owner);
  void release_all(uint64_t owner);
  bool held(std::string_view key) const;
  LeaseStats stats() const;

 private:
  struct Wait {
    uint64_t id;
    Clock::time_point deadline;
    Waiter waiter;
  };
  struct Lease {
    uint64_t owner;
    std::vector<Wait> waits;
  };
  using Ended = std::vector<std::pair<Waiter, std::optional<std::string>>>;

  void end_lease_locked(std::unordered_map<std::string, Lease>::iterator it, Ended& ended,
                        bool served) REQUIRES(m_mutex);
  static void run_waiters(Ended& ended);
  void expire_loop();

  mutable Mutex m_mutex;
  CondVar m_deadline_changed{&m_mutex};
  std::unordered_map<std::string, Lease> m_leases GUARDED_BY(m_mutex);
  // Deadline -> (key, wait id): the earliest wait to expire first.
  std::multimap<Clock::time_point, std::pair<std::string, uint64_t>> m_deadlines
      GUARDED_BY(m_mutex);
  uint64_t m_next_wait GUARDED_BY(m_mutex) = 1;
  LeaseStats m_stats GUARDED_BY(m_mutex);
  bool m_stopping GUARDED_BY(m_mutex) = false;
  std::thread m_deadline_thread;
};

}  // namespace ccpool::resp
