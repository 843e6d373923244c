// See worker_sessions.h.
#include "service/worker_sessions.h"

#include <spdlog/spdlog.h>

#include "service/mount_view.h"

namespace ccpool::service {

WorkerSessions::WorkerSessions(workers::WorkerPool& pool, Options options, Send send)
    : m_pool(pool), m_options(std::move(options)), m_send(std::move(send)) {}

void WorkerSessions::refuse(uint64_t conn, ErrorCode code, const std::string& message) {
  m_send(conn, ipc::Message(ipc::ErrorFrame{static_cast<uint16_t>(code), message}), true);
}

void WorkerSessions::on_open(uint64_t conn, pid_t peer_pid, ipc::PoolOpen open) {
  // A rank that sees another filesystem (a container, a private /tmp) names
  // an interpreter, paths and a cwd of its own view; a worker started in the
  // service's view could run another Python on other files. Its workers stay
  // its own (Inductor's pool); only the rank's C/C++ and ptxas execs are
  // served in its view (service/mount_view.h).
  auto view = MountView::of_peer(peer_pid);
  if (!view || *view) {
    return refuse(conn, ErrorCode::kUnsupported,
                  "this rank sees another filesystem than the ccpool service (" +
                      (view ? "mount namespace " + (*view)->id() : view.error().message) +
                      "): its Inductor compile workers stay its own (docs/inductor-workers.md)");
  }
  workers::PoolRequest request{std::move(open.python), std::move(open.cwd), std::move(open.env),
                               std::move(open.args)};
  auto env = workers::make_environment(request, m_options.python_dir, m_options.worker_env);
  if (!env) return refuse(conn, env.error().code, env.error().message);
  std::shared_ptr<const workers::Environment> env_for_warm;
  {
    MutexLock lock(&m_mutex);
    if (m_sessions.count(conn)) {
      lock.unlock();
      return refuse(conn, ErrorCode::kProtocol, "pool-open sent twice on one connection");
    }
    Session& s = m_sessions[conn];
    s.env = std::move(*env);
    // Fairness bucket: the rank, else the requesting process.
    s.bucket = open.rank >= 0 ? static_cast<uint64_t>(open.rank)
                              : (uint64_t{1} << 32) + static_cast<uint64_t>(peer_pid);
    spdlog::info("pool session for pid {} (rank {}): {} in {}, environment {}", peer_pid, open.rank,
                 s.env->python, s.env->cwd, s.env->id.substr(0, 12));
    env_for_warm = s.env;
  }
  m_pool.warm(env_for_warm);
  m_send(conn, ipc::Message(ipc::PoolOpened{static_cast<uint32_t>(m_pool.max_workers())}), false);
}

void WorkerSessions::on_submit(uint64_t conn, ipc::PoolSubmit submit) {
  std::shared_ptr<const workers::Environment> env;
  uint64_t bucket;
  {
    MutexLock lock(&m_mutex);
    auto it = m_sessions.find(conn);
    if (it == m_sessions.end() || it->second.jobs.count(submit.job_id)) {
      const char* why =
          it == m_sessions.end() ? "pool-submit before pool-open" : "pool-submit reuses a job id";
      lock.unlock();
      return refuse(conn, ErrorCode::kProtocol, why);
    }
    env = it->second.env;
    bucket = it->second.bucket;
    it->second.jobs[submit.job_id] = 0;  // reserved: the pool may answer before submit() returns
  }
  uint64_t client_id = submit.job_id;
  auto answer = [this, conn, client_id](workers::JobResult result) {
    {
      MutexLock lock(&m_mutex);
      auto it = m_sessions.find(conn);
      if (it == m_sessions.end() || !it->second.jobs.erase(client_id)) return;
    }
    ipc::PoolResult reply;
    reply.job_id = client_id;
    reply.status = result.status == workers::JobStatus::kDone ? ipc::PoolJobStatus::kDone
                                                              : ipc::PoolJobStatus::kFailed;
    reply.followed = result.followed;
    reply.payload = std::move(result.payload);
    reply.message = std::move(result.message);
    m_send(conn, ipc::Message(std::move(reply)), false);
  };
  // Inductor's readiness probe is answered once a worker of the rank's
  // environment is up, without queueing behind other ranks' compiles.
  uint64_t pool_id = submit.flight_key == ipc::kReadyProbeKey
                         ? m_pool.await_ready(env, std::move(answer))
                         : m_pool.submit(env, bucket, std::move(submit.flight_key),
                                         std::move(submit.payload), std::move(answer));
  MutexLock lock(&m_mutex);
  auto it = m_sessions.find(conn);
  if (it == m_sessions.end()) return;  // disconnected meanwhile: on_disconnect could not cancel it
  auto job = it->second.jobs.find(client_id);
  if (job != it->second.jobs.end()) job->second = pool_id;
}

void WorkerSessions::on_cancel(uint64_t conn, const ipc::PoolCancel& cancel) {
  uint64_t pool_id = 0;
  {
    MutexLock lock(&m_mutex);
    auto it = m_sessions.find(conn);
    if (it == m_sessions.end()) return;
    auto job = it->second.jobs.find(cancel.job_id);
    if (job == it->second.jobs.end()) return;
    pool_id = job->second;
    it->second.jobs.erase(job);
  }
  if (pool_id) m_pool.cancel(pool_id);
}

void WorkerSessions::on_disconnect(uint64_t conn) {
  std::vector<uint64_t> pool_ids;
  {
    MutexLock lock(&m_mutex);
    auto it = m_sessions.find(conn);
    if (it == m_sessions.end()) return;
    for (const auto& [client_id, pool_id] : it->second.jobs) {
      if (pool_id) pool_ids.push_back(pool_id);
    }
    m_sessions.erase(it);
  }
  if (pool_ids.empty()) return;
  // Each job and what it was doing: a worker that stays busy after its
  // session closed is then named in the log (torch.workers.ctrl_c).
  std::string what;
  for (uint64_t id : pool_ids) {
    what += (what.empty() ? "" : "; ") + std::string("job ") + std::to_string(id) + " " +
            m_pool.cancel(id);
  }
  spdlog::info("pool session {} closed with {} job(s) in flight, cancelled: {}", conn,
               pool_ids.size(), what);
}

size_t WorkerSessions::sessions() const {
  MutexLock lock(&m_mutex);
  return m_sessions.size();
}

}  // namespace ccpool::service
