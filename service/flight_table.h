// Single-flight: identical requests (equal flight keys) that arrive while the
// first is queued or running join it and share its one execution and result.
//
// Ownership: the table owns Flight objects through shared_ptr; the exec
// pipeline holds a reference while the job is queued or running. All fields
// of Flight marked "guarded" are protected by FlightTable::m_mutex.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/fs.h"
#include "base/hash.h"
#include "compiler/planner.h"
#include "pool/scheduler.h"

namespace ccpool::service {

// One requester waiting for a flight's result.
struct Waiter {
  uint64_t conn_id = 0;
  pid_t client_pid = 0;
  uint32_t umask = 022;
  compiler::Plan plan;  // this requester's own plan (its deliver paths)
};

struct Flight {
  enum class State { kQueued, kRunning, kDone };

  uint64_t id = 0;
  Digest key;
  compiler::Plan plan;  // the leader's plan: what runs
  std::string program;  // resolved tool path (set by the leader before scheduling)
  std::string work_dir; // private dir for redirected outputs (when plan.uses_work_dir)
  std::vector<std::string> waiters_argv;  // the leader's original argv (record metadata)
  std::atomic<bool> lease_held{false};    // cross-node lease taken by this node
  std::shared_ptr<UniqueFd> stdin_fd;     // pass-through only: the leader's stdin
  uint64_t fairness_id = 0;
  std::chrono::system_clock::time_point started;  // set when the tool is spawned

  // guarded by FlightTable::m_mutex
  State state = State::kQueued;
  std::vector<Waiter> waiters;
  std::atomic<pool::JobId> job{0};  // written under the mutex, read anywhere
  std::atomic<pid_t> pid{0};
  bool cancelled = false;
};

class FlightTable {
 public:
  struct JoinResult {
    std::shared_ptr<Flight> flight;
    bool leader = false;
  };

  // Joins the in-flight job with this key, or creates it with `waiter` as the
  // leader. `plan` is only used when a new flight is created.
  JoinResult join_or_lead(const Digest& key, bool shareable, Waiter waiter,
                          const compiler::Plan& plan, uint64_t fairness_id);

  // Removes every waiter of connection `conn_id`. Returns the flights left
  // with no waiter at all; the caller cancels them.
  std::vector<std::shared_ptr<Flight>> remove_connection(uint64_t conn_id);

  // Marks the flight done, unlinks it and hands over its waiters.
  std::vector<Waiter> complete(const std::shared_ptr<Flight>& flight);

  // Records the admitted job / spawned pid. Returns false when the flight was
  // cancelled meanwhile (the caller must not, or must no longer, run it).
  bool set_job(const std::shared_ptr<Flight>& flight, pool::JobId job);
  bool set_running(const std::shared_ptr<Flight>& flight, pid_t pid);
  bool is_cancelled(const std::shared_ptr<Flight>& flight);

  // Every live flight (for shutdown and status).
  std::vector<std::shared_ptr<Flight>> all();
  pid_t leader_client_pid(uint64_t flight_id);
  size_t size();

 private:
  std::mutex m_mutex;
  uint64_t m_next_id = 1;                                                   // guarded
  std::unordered_map<Digest, std::shared_ptr<Flight>> m_by_key;            // guarded
  std::unordered_map<uint64_t, std::shared_ptr<Flight>> m_by_id;           // guarded
};

}  // namespace ccpool::service
