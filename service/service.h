// The node service: composes the store, the pool, the compiler models, the
// protocol hub, the Redis-protocol front and the cluster tier. One instance
// per socket (serve.lock); see ARCHITECTURE.md for the data flow.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "base/error.h"
#include "base/fault.h"
#include "remote/tier.h"

namespace ccpool::service {

struct ServiceOptions {
  std::string socket_path;
  std::string store_dir;
  uint64_t max_size = 0;    // 0: the store's default
  int jobs = 0;             // 0: available_cpus() (base/process_facts.h)
  uint64_t mem_budget = 0;  // 0: min(80% MemAvailable, cgroup limit)
  std::chrono::milliseconds job_timeout{0};
  std::chrono::milliseconds idle_timeout{3'600'000};
  std::optional<remote::RemoteOptions> remote;
  bool resp_enabled = true;  // the Redis-protocol front on <state dir>/resp.sock
  size_t resp_threads =
      0;  // event-loop threads of the front; 0: 1, or 4 with a tier (its calls block a thread)
  int resp_port = 0;  // also 127.0.0.1:PORT when > 0
  std::string resp_password;
  int metrics_port = -1;  // >= 0: serve GET /metrics on 127.0.0.1:PORT (0: any free port)
  int listen_fd = -1;     // a listening socket passed by systemd; the service owns it
  std::string
      python_dir;  // holds the ccpool package the node pool's workers run (share/ccpool/python)
  std::chrono::milliseconds worker_idle_timeout{60'000};  // an idle compile worker exits after this
  // Handed to the store, the runner and the pipeline; not owned, outlives the service.
  FaultInjector* faults = &FaultInjector::none();
  // Keep lookup answers across requests (compiler/validation_memo.h); it
  // holds inotify watches from the user's own limit (at most a quarter).
  bool validation_memo = true;
  // Serve a hit that arrives while the service is otherwise idle on the I/O
  // thread, without handing it to a request thread (ExecPipeline::submit).
  bool hits_on_io_thread = true;
};

inline constexpr const char* kVersion = "0.1.0";

class Service {
 public:
  static Result<std::unique_ptr<Service>> create(const ServiceOptions& options);
  ~Service();
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  // Serves until stop (signal, `ccpool stop`, idle timeout); returns the exit code.
  int run();
  // Async-signal-safe.
  void request_stop();

  struct Impl;

 private:
  explicit Service(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

}  // namespace ccpool::service
