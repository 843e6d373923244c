// Pool sessions (ipc/PROTOCOL.md, "Pool sessions"): a connection that sent
// pool-open carries one rank's Inductor compile jobs to the node's
// WorkerPool; this class maps its job ids to the pool's, answers pool-result
// frames, and withdraws a rank's jobs when its connection closes (Ctrl-C, a
// crash: no job of it is left behind).
//
// Thread-safety: on_* run on the hub's I/O thread; results arrive from the
// pool's threads. One mutex guards the session table.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/thread_annotations.h"
#include "ipc/protocol.h"
#include "workers/worker_pool.h"

namespace ccpool::service {

class WorkerSessions {
 public:
  using Send = std::function<void(uint64_t conn, ipc::Message message, bool close_after)>;
  struct Options {
    std::string python_dir;               // holds the ccpool package the workers run
    std::vector<std::string> worker_env;  // added to every worker's environment
  };
  WorkerSessions(workers::WorkerPool& pool, Options options, Send send);

  void on_open(uint64_t conn, pid_t peer_pid, ipc::PoolOpen open);
  void on_submit(uint64_t conn, ipc::PoolSubmit submit);
  void on_cancel(uint64_t conn, const ipc::PoolCancel& cancel);
  void on_disconnect(uint64_t conn);
  size_t sessions() const;

 private:
  struct Session {
    std::shared_ptr<const workers::Environment> env;
    uint64_t bucket = 0;
    std::unordered_map<uint64_t, uint64_t> jobs;  // the client's job id -> the pool's
  };
  void refuse(uint64_t conn, ErrorCode code, const std::string& message);

  workers::WorkerPool& m_pool;
  const Options m_options;
  const Send m_send;
  mutable Mutex m_mutex;
  std::unordered_map<uint64_t, Session> m_sessions GUARDED_BY(m_mutex);
};

}  // namespace ccpool::service
