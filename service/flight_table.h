// Single-flight: identical requests (equal flight keys) that arrive while the
// first is queued or running join it and share its one execution and result.
//
// Ownership: the table owns Flight objects through shared_ptr; the exec
// pipeline holds a reference while the job is queued or running. The GUARDED_BY
// fields of Flight are protected by g_flight_mutex (checked by clang).
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
#include "base/thread_annotations.h"
#include "compiler/planner.h"
#include "pool/scheduler.h"
#include "service/mount_view.h"

namespace ccpool::service {

// One requester waiting for a flight's result. Everything needed to run its
// own compile travels with it: a joiner whose view of the inputs turns out to
// differ from the leader's runs its own plan (exec_pipeline.cpp).
struct Waiter {
  uint64_t conn_id = 0;
  pid_t client_pid = 0;
  uint32_t umask = 022;
  bool leader = false;            // set by the table: this waiter's plan is the one that runs
  compiler::Plan plan;            // this requester's own plan (its deliver paths)
  std::string program;            // resolved tool path
  std::string work_dir;           // private dir its plan's redirected outputs point into
  std::vector<std::string> argv;  // the requester's original argv (record metadata)
  uint64_t fairness_id = 0;
  // The requester's filesystem view when it is not the service's (null):
  // its plan, lookup and delivery run inside it (service/mount_view.h).
  std::shared_ptr<const MountView> view;
  std::chrono::steady_clock::time_point received;  // its request decoded (miss stages)
};

// The flight table's lock: it guards the table's maps and the GUARDED_BY
// fields of every Flight. It is not a FlightTable member because a Flight
// outlives its table entry (callers hold shared_ptrs) and clang's analysis
// must name the lock from inside Flight. One per process; trivially
// destructible (std::mutex is), so not a static with a destructor.
extern Mutex g_flight_mutex;

// Built completely by the pipeline before join_or_lead() publishes it; after
// that only the GUARDED_BY fields change (under g_flight_mutex) and the atomics.
struct Flight {
  enum class State { kQueued, kRunning, kDone };

  uint64_t id = 0;  // set by join_or_lead
  Digest key;
  compiler::Plan plan;   // the leader's plan: what runs
  std::string program;   // resolved tool path
  std::string work_dir;  // private dir for redirected outputs (when plan.uses_work_dir)
  std::shared_ptr<const MountView>
      view;  // the leader's view: where the tool runs (null: the service's)
  std::vector<std::string> waiters_argv;  // the leader's original argv (record metadata)
  std::shared_ptr<UniqueFd> stdin_fd;     // pass-through only: the leader's stdin
  uint64_t fairness_id = 0;
  bool shared = false;                            // set by join_or_lead: others may join it
  std::atomic<bool> lease_held{false};            // cross-node lease taken by this node
  std::atomic<bool> retired{false};               // work dir removed and lease released (once)
  std::chrono::system_clock::time_point started;  // set when the tool is spawned
  // The miss stages' marks (service/counters.h MissStage): the leader's
  // request decoded, the tool spawned, its exit seen (each written before the
  // step that reads it is posted).
  std::chrono::steady_clock::time_point received, spawned, exited;

  State state GUARDED_BY(g_flight_mutex) = State::kQueued;
  std::vector<Waiter> waiters GUARDED_BY(g_flight_mutex);
  std::atomic<pool::JobId> job{0};  // written under g_flight_mutex, read anywhere
  std::atomic<pid_t> pid{0};        // written under g_flight_mutex, read anywhere
  bool cancelled GUARDED_BY(g_flight_mutex) = false;
};

class FlightTable {
 public:
  struct JoinResult {
    std::shared_ptr<Flight> flight;
    bool leader = false;
  };

  // Joins the live flight with candidate->key when `shareable`, or publishes
  // `candidate` (fully built by the caller) with `waiter` as its leader. A
  // flight that is not shareable is never joined.
  JoinResult join_or_lead(std::shared_ptr<Flight> candidate, bool shareable, Waiter waiter);

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
  uint64_t m_next_id GUARDED_BY(g_flight_mutex) = 1;
  std::unordered_map<Digest, std::shared_ptr<Flight>> m_by_key GUARDED_BY(g_flight_mutex);
  std::unordered_map<uint64_t, std::shared_ptr<Flight>> m_by_id GUARDED_BY(g_flight_mutex);
};

}  // namespace ccpool::service
