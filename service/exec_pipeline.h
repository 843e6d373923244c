// The path of one exec request through the service:
//   plan (compiler model) -> lookup (manifest, node store, cluster tier)
//   -> hit: deliver outputs, reply
//   -> miss: join the identical in-flight job, or lead one: schedule in the
//      bounded pool -> spawn -> reap -> collect -> store -> deliver -> reply.
// A joiner gets the leader's result only after its own view of the inputs
// validates against the leader's manifest, exactly like a hit; otherwise it
// runs its own compile (docs/cache-keys.md, "Joins").
//
// Threads: submit() and on_disconnect() are called on the I/O thread and
// post work: planning, lookup and a hit's delivery run on the scheduler's
// request threads (run_request). A request that arrives while the I/O thread
// and every request thread have nothing else to do is tried on the I/O
// thread first, under compiler::BoundedScope (no helper, no large read, a
// C/C++ entry only when the validation memo vouches for it whole), as a hit
// from the node store with small outputs in the service's own view; anything
// else (a miss, the cluster tier, a foreign view, a large delivery, a decline)
// goes to a request thread as before, with the plan when one was made
// without a decline (serve_on_io_thread).
// Process exits arrive on the ProcessRunner's
// reaper thread and are re-posted into the arena, where collecting, storing
// and delivery to the waiters run. Cross-node lease waits run on threads of
// their own so they never park an arena worker or a request thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/fault.h"
#include "compiler/planner.h"
#include "ipc/protocol.h"
#include "pool/process_runner.h"
#include "pool/scheduler.h"
#include "remote/tier.h"
#include "service/counters.h"
#include "service/flight_table.h"
#include "service/storage.h"

namespace ccpool::service {

class ExecPipeline {
 public:
  struct Deps {
    Storage& storage;
    pool::Scheduler& scheduler;
    pool::ProcessRunner& runner;
    compiler::Planner& planner;
    remote::Tier* tier;  // leases only (data goes through `storage`); null without a cluster tier
    Counters& counters;
    std::function<void(uint64_t conn_id, ipc::ExecReply reply)> reply;  // thread-safe
    std::string work_root;  // private temp dirs for redirected outputs
    std::chrono::milliseconds job_timeout{0};
    FaultInjector& faults = FaultInjector::none();  // seam (base/fault.h); not owned
    // Serve a quiet arrival's hit on the I/O thread (submit()); off: every
    // request goes to a request thread (CCPOOL_IO_THREAD_HITS=0).
    bool hits_on_io_thread = true;
  };

  // The most output bytes a hit served on the I/O thread writes.
  static constexpr uint64_t kMaxIoThreadDelivery = 1 << 20;

  explicit ExecPipeline(Deps deps);
  ~ExecPipeline();
  ExecPipeline(const ExecPipeline&) = delete;
  ExecPipeline& operator=(const ExecPipeline&) = delete;

  // stdin_fd: the client's stdin, given to the tool when the request runs as
  // a pass-through (cacheable jobs run with an empty stdin: their keys do not
  // cover it). `quiet`: nothing else waits for the I/O thread
  // (ConnectionHub::quiet()), so a hit may be served on it.
  void submit(uint64_t conn_id, pid_t peer_pid, ipc::ExecRequest request, UniqueFd stdin_fd,
              bool quiet = false);
  void on_disconnect(uint64_t conn_id);
  // Shutdown: every waiter gets "stopping", queued jobs are dropped; running
  // processes are killed by the caller through the runner.
  void stop_all();
  nlohmann::json running_jobs();
  size_t active_flights() { return m_flights.size(); }
  size_t pending() const { return m_pending.load() + m_lease_threads.load(); }
  // The planner's deferred lessons (PlannerOptions::defer_lessons), learned
  // from the node store while no request is in flight or waiting: it stops
  // before the next lesson once one arrives, or on stop_all(). Call it in
  // the arena. Returns how many it learned.
  size_t learn_lessons_while_idle();

 private:
  // What one execution produced, and what may be done with it.
  struct RunOutcome {
    cache::Entry entry;
    bool success = false;             // exit 0, no timeout, no truncated output
    compiler::Conclusion conclusion;  // what the planner concluded (store or not, key, manifest)
  };

  // What serve_from_store() did: nothing (not in the store, or the manifest
  // does not validate), served a hit from the node store or the cluster
  // tier, or answered kFailed because the outputs could not be written.
  enum class Served { kNothing, kNodeHit, kRemoteHit, kFailed };

  // A plan made in the service's own view (by serve_on_io_thread) and its work dir.
  struct Planned {
    compiler::Plan plan;
    std::string work_dir;
  };

  // `planned`: the request's plan, already made; otherwise handle() makes it.
  void handle(uint64_t conn_id, pid_t peer_pid, ipc::ExecRequest request,
              std::shared_ptr<UniqueFd> stdin_fd, std::chrono::steady_clock::time_point received,
              std::optional<Planned> planned = std::nullopt);
  // A hit served on the I/O thread, or false (nothing was sent: the request
  // goes to a request thread, with the plan in *planned when one was made
  // without a decline, so that it is not made twice).
  bool serve_on_io_thread(uint64_t conn_id, pid_t peer_pid, const ipc::ExecRequest& request,
                          std::chrono::steady_clock::time_point received,
                          std::optional<Planned>* planned);
  // `timer`: marks the lookup, fetch, deliver and reply stages (a hit on arrival).
  // `bounded` (the I/O thread): the node store only, and nothing delivered
  // past kMaxIoThreadDelivery bytes: kNothing instead, with nothing sent.
  Served serve_from_store(const Waiter& waiter, bool made_remotely = false,
                          HitTimer* timer = nullptr, bool bounded = false);
  void join_or_lead(Waiter waiter, bool shareable, std::shared_ptr<UniqueFd> stdin_fd);
  void rerun(Waiter waiter);
  void lead(const std::shared_ptr<Flight>& flight);
  void lease_then_schedule(const std::shared_ptr<Flight>& flight);
  bool complete_from_store(const std::shared_ptr<Flight>& flight);
  void schedule(const std::shared_ptr<Flight>& flight);
  void start(const std::shared_ptr<Flight>& flight, pool::JobId job);
  void finish_flight(const std::shared_ptr<Flight>& flight, pool::ProcessResult result);
  RunOutcome collect(const Flight& flight, pool::ProcessResult result);
  bool store(const Flight& flight, const RunOutcome& run);
  void deliver_run(const Flight& flight, const RunOutcome& run, std::vector<Waiter> waiters);
  bool joiner_matches(const Waiter& waiter, const RunOutcome& run);
  void fail_flight(const std::shared_ptr<Flight>& flight, const std::string& message);
  void retire(Flight& flight);
  // An exception escaped the request's work: answer kFailed, drop its waiter.
  void fail_request(uint64_t conn_id, const std::string& what);

  // Counts a posted request until its work returns, however it returns.
  class PendingGuard {
   public:
    explicit PendingGuard(std::atomic<size_t>& pending) : m_pending(pending) {}
    ~PendingGuard() { --m_pending; }
    PendingGuard(const PendingGuard&) = delete;
    PendingGuard& operator=(const PendingGuard&) = delete;

   private:
    std::atomic<size_t>& m_pending;
  };
  compiler::ManifestStorage manifests(bool local_only = false);
  void send(const Waiter& waiter, ipc::ExecReply reply);

  Deps m_deps;
  FlightTable m_flights;
  std::atomic<uint64_t> m_work_seq{0};
  std::atomic<size_t> m_pending{0};  // requests posted but not yet answered or parked
  std::atomic<bool> m_stopping{false};
  std::atomic<size_t> m_lease_threads{
      0};  // side threads: cross-node lease waits, fault-injection holds
};

}  // namespace ccpool::service
