// Runs the real ccpool-client binary: fallback when no service answers,
// byte-exact replay of a fake service's reply, fallback on "stopping" and on
// a dropped connection, auto-start, and the N-slot bound on fallbacks.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <thread>

#include "base/fs.h"
#include "ipc/socket.h"
#include "tests/support/scratch.h"

namespace ccpool::client {
namespace {

using std::chrono::milliseconds;

struct Output {
  int code = -1;
  std::string out, err;
};

std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (std::string& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

pid_t spawn(std::vector<std::string> argv, std::vector<std::string> env, int out_fd, int err_fd) {
  std::vector<char*> args = c_strings(argv), envp = c_strings(env);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out_fd, 1);
    ::dup2(err_fd, 2);
    ::execve(args[0], args.data(), envp.data());
    ::_exit(126);
  }
  return pid;
}

int wait_exit(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

Output run(std::vector<std::string> argv, std::vector<std::string> env) {
  int out[2], err[2];
  EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
  EXPECT_EQ(::pipe2(err, O_CLOEXEC), 0);
  pid_t pid = spawn(std::move(argv), std::move(env), out[1], err[1]);
  ::close(out[1]);
  ::close(err[1]);
  Output result;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_fds = 2;
  char buf[4096];
  while (open_fds > 0 && ::poll(fds, 2, 60000) > 0) {
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !fds[i].revents) continue;
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        (i == 0 ? result.out : result.err).append(buf, static_cast<size_t>(n));
      } else {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  result.code = wait_exit(pid);
  return result;
}

class ClientProcess : public ::testing::Test {
 protected:
  void SetUp() override {
    m_state = ccpool::testing::scratch_dir() + "/st";
    m_socket = m_state + "/sock";
    m_env = {"PATH=/usr/bin:/bin", "CCPOOL_SOCKET=" + m_socket, "CCPOOL_NO_AUTOSTART=1"};
  }
  Output client(std::vector<std::string> args, std::vector<std::string> extra_env = {}) {
    args.insert(args.begin(), ccpool::testing::build_binary("ccpool-client"));
    std::vector<std::string> env = m_env;
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    return run(std::move(args), std::move(env));
  }
  std::vector<std::string> fallback_lines() {
    auto text = read_file(m_state + "/fallbacks.log");
    std::vector<std::string> lines;
    if (!text) return lines;
    size_t start = 0;
    for (size_t nl; (nl = text->find('\n', start)) != std::string::npos; start = nl + 1) {
      lines.push_back(text->substr(start, nl - start));
    }
    return lines;
  }

  std::string m_state, m_socket;
  std::vector<std::string> m_env;
};

// A one-connection fake service on the test's socket.
class FakeService {
 public:
  using Answer = std::function<std::optional<ipc::Message>(const ipc::ExecRequest&)>;
  // Listens before returning (so the client cannot race it), except with
  // `wait_for_file`, where the thread listens once the fake serve has run.
  FakeService(const std::string& socket, Answer answer, bool wait_for_file = false) {
    EXPECT_TRUE(ensure_private_dir(state_dir(socket)));
    if (!wait_for_file) m_listener = listen_or_fail(socket);
    m_thread =
        std::thread([this, socket, answer, wait_for_file] { run(socket, answer, wait_for_file); });
  }
  ~FakeService() { m_thread.join(); }
  ipc::ExecRequest request() const { return m_request; }
  static std::string state_dir(const std::string& socket) {
    return socket.substr(0, socket.rfind('/'));
  }

 private:
  void run(const std::string& socket, const Answer& answer, bool wait_for_file) {
    // For the auto-start test: listen only once the fake `ccpool serve` ran.
    for (int i = 0; wait_for_file && i < 2000 && !path_exists(state_dir(socket) + "/serve-args");
         ++i) {
      std::this_thread::sleep_for(milliseconds(5));
    }
    if (wait_for_file) m_listener = listen_or_fail(socket);
    pollfd p{m_listener.get(), POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 30000), 1);
    UniqueFd conn(::accept4(m_listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    ipc::FrameReader reader;
    auto deadline = ipc::deadline_in(milliseconds(30000));
    auto hello = ipc::recv_message(conn.get(), reader, deadline);
    ASSERT_TRUE(hello && std::holds_alternative<ipc::Hello>(*hello));
    ASSERT_TRUE(ipc::send_message(conn.get(), ipc::HelloOk{ipc::kProtocolVersion, 0, ::getpid()},
                                  deadline));
    auto m = ipc::recv_message(conn.get(), reader, deadline);
    ASSERT_TRUE(m && std::holds_alternative<ipc::ExecRequest>(*m));
    m_request = std::get<ipc::ExecRequest>(*m);
    auto reply = answer(m_request);
    if (reply) {
      ASSERT_TRUE(ipc::send_message(conn.get(), *reply, deadline));
    }
  }

  static UniqueFd listen_or_fail(const std::string& socket) {
    auto listener = ipc::listen_unix(socket);
    EXPECT_TRUE(listener) << listener.error().message;
    return listener ? std::move(*listener) : UniqueFd();
  }

  UniqueFd m_listener;
  std::thread m_thread;
  ipc::ExecRequest m_request;
};

TEST_F(ClientProcess, NoServiceFallsBackAndLogs) {
  Output r = client({"/bin/echo", "echo", "hi"});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "hi\n");
  auto lines = fallback_lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("\t/bin/echo"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("no ccpool service"), std::string::npos) << lines[0];
}

TEST_F(ClientProcess, FallbackPreservesExitCodeAndStderr) {
  Output r = client({"/bin/sh", "sh", "-c", "echo oops >&2; exit 7"});
  EXPECT_EQ(r.code, 7);
  EXPECT_EQ(r.err, "oops\n");
  EXPECT_EQ(fallback_lines().size(), 1u);
}

TEST_F(ClientProcess, FallbackEnvironmentDropsShimAndDisablesCcpool) {
  Output r =
      client({"/usr/bin/env", "env"}, {"LD_PRELOAD=/nonexistent/libccpool-shim.so", "KEEP=me"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("CCPOOL_DISABLE=1\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("KEEP=me\n"), std::string::npos);
  EXPECT_EQ(r.out.find("LD_PRELOAD"), std::string::npos) << r.out;
}

TEST_F(ClientProcess, DisabledExecsDirectlyWithoutLogging) {
  Output r = client({"/bin/echo", "echo", "direct"}, {"CCPOOL_DISABLE=1"});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "direct\n");
  EXPECT_TRUE(fallback_lines().empty());
}

TEST_F(ClientProcess, MissingProgramIs127) {
  Output r = client({"/nonexistent/tool", "tool"});
  EXPECT_EQ(r.code, 127);
  EXPECT_NE(r.err.find("/nonexistent/tool"), std::string::npos) << r.err;
}

TEST_F(ClientProcess, UsageErrorWithoutProgram) {
  Output r = client({});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("usage"), std::string::npos);
}

TEST_F(ClientProcess, ReplaysServiceReplyByteExact) {
  std::string out_bytes("out\0put\xff", 8);
  FakeService service(m_socket, [&](const ipc::ExecRequest&) -> std::optional<ipc::Message> {
    ipc::ExecReply reply;
    reply.exit_code = 3;
    reply.stdout_data = out_bytes;
    reply.stderr_data = "warning: x\n";
    reply.outcome = ipc::CacheOutcome::kHit;
    return reply;
  });
  Output r = client({"/usr/bin/g++", "g++", "-c", "k.cpp"},
                    {"RANK=5", "LD_PRELOAD=/opt/libccpool-shim.so:/opt/libother.so"});
  EXPECT_EQ(r.code, 3);
  EXPECT_EQ(r.out, out_bytes);
  EXPECT_EQ(r.err, "warning: x\n");
  EXPECT_TRUE(fallback_lines().empty());
  ipc::ExecRequest req = service.request();
  EXPECT_EQ(req.program, "/usr/bin/g++");
  EXPECT_EQ(req.argv, (std::vector<std::string>{"g++", "-c", "k.cpp"}));
  EXPECT_EQ(req.rank, 5);
  EXPECT_GT(req.client_pid, 0);
  EXPECT_NE(std::find(req.env.begin(), req.env.end(), "LD_PRELOAD=/opt/libother.so"),
            req.env.end());
  EXPECT_NE(std::find(req.env.begin(), req.env.end(), "RANK=5"), req.env.end());
}

// The shim's --inherited-socket is used when the environment names no socket
// (a caller cleaned it), and CCPOOL_SOCKET in the environment still wins.
TEST_F(ClientProcess, InheritedSocketServesACleanedEnvironment) {
  FakeService service(m_socket, [&](const ipc::ExecRequest&) -> std::optional<ipc::Message> {
    ipc::ExecReply reply;
    reply.stdout_data = "served\n";
    return reply;
  });
  m_env = {"PATH=/usr/bin:/bin", "CCPOOL_NO_AUTOSTART=1"};  // as after env -i
  Output r = client({"--inherited-socket=" + m_socket, "/bin/echo", "echo", "local"});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "served\n");
  EXPECT_EQ(service.request().argv, (std::vector<std::string>{"echo", "local"}));
  std::string elsewhere = ccpool::testing::scratch_dir() + "/none/sock";
  Output env_wins = client({"--inherited-socket=" + m_socket, "/bin/echo", "echo", "local"},
                           {"CCPOOL_SOCKET=" + elsewhere});
  EXPECT_EQ(env_wins.out, "local\n");  // nobody on CCPOOL_SOCKET: ran locally
}

TEST_F(ClientProcess, StoppingReplyFallsBack) {
  FakeService service(m_socket, [](const ipc::ExecRequest&) -> std::optional<ipc::Message> {
    ipc::ExecReply reply;
    reply.status = ipc::ExecStatus::kStopping;
    reply.stdout_data = "must not appear";
    return reply;
  });
  Output r = client({"/bin/echo", "echo", "local"});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "local\n");
  auto lines = fallback_lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("service stopping"), std::string::npos) << lines[0];
}

TEST_F(ClientProcess, DroppedConnectionFallsBack) {
  FakeService service(m_socket,
                      [](const ipc::ExecRequest&) { return std::optional<ipc::Message>(); });
  Output r = client({"/bin/echo", "echo", "dropped"});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "dropped\n");
  EXPECT_EQ(fallback_lines().size(), 1u);
}

TEST_F(ClientProcess, ErrorFrameFallsBack) {
  FakeService service(m_socket, [](const ipc::ExecRequest&) -> std::optional<ipc::Message> {
    return ipc::ErrorFrame{static_cast<uint16_t>(ErrorCode::kInternal), "boom"};
  });
  Output r = client({"/bin/echo", "echo", "err"});
  EXPECT_EQ(r.out, "err\n");
  auto lines = fallback_lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("boom"), std::string::npos);
}

TEST_F(ClientProcess, AutoStartsServiceThenUsesIt) {
  // A fake `ccpool` that records how it was started; the fake service starts
  // listening only after that, so the client must have started it and retried.
  std::string fake = ccpool::testing::scratch_dir() + "/ccpool";
  ASSERT_TRUE(
      write_file_atomic(fake, "#!/bin/sh\necho \"$@\" > \"" + m_state + "/serve-args\"\n", 0755));
  FakeService service(
      m_socket,
      [](const ipc::ExecRequest&) -> std::optional<ipc::Message> {
        ipc::ExecReply reply;
        reply.stdout_data = "from service\n";
        return reply;
      },
      /*wait_for_file=*/true);
  m_env.erase(std::remove(m_env.begin(), m_env.end(), "CCPOOL_NO_AUTOSTART=1"), m_env.end());
  Output r = client({"/bin/echo", "echo", "x"}, {"CCPOOL_SERVICE_BINARY=" + fake});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "from service\n");
  auto args = read_file(m_state + "/serve-args");
  ASSERT_TRUE(args);
  EXPECT_EQ(*args, "serve --socket " + m_socket + "\n");
  EXPECT_TRUE(fallback_lines().empty());
}

TEST_F(ClientProcess, SlotLockBoundsConcurrentFallbacks) {
  // Each run registers itself in `running/`, records how many are registered,
  // holds for a while, then leaves. With 2 slots no run may ever see 3.
  std::string dir = ccpool::testing::scratch_dir();
  ASSERT_EQ(::mkdir((dir + "/running").c_str(), 0700), 0);
  std::string script = "touch " + dir + "/running/$$; ls " + dir + "/running | wc -l >> " + dir +
                       "/seen; sleep 0.3; rm " + dir + "/running/$$";
  int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  std::vector<pid_t> pids;
  for (int i = 0; i < 6; ++i) {
    std::vector<std::string> env = m_env;
    env.push_back("CCPOOL_JOBS=2");
    pids.push_back(
        spawn({ccpool::testing::build_binary("ccpool-client"), "/bin/sh", "sh", "-c", script}, env,
              null_fd, null_fd));
  }
  for (pid_t pid : pids) EXPECT_EQ(wait_exit(pid), 0);
  ::close(null_fd);
  auto seen = read_file(dir + "/seen");
  ASSERT_TRUE(seen);
  int runs = 0, peak = 0;
  for (size_t start = 0, nl; (nl = seen->find('\n', start)) != std::string::npos; start = nl + 1) {
    ++runs;
    peak = std::max(peak, std::stoi(seen->substr(start, nl - start)));
  }
  EXPECT_EQ(runs, 6);
  EXPECT_GE(peak, 1);
  EXPECT_LE(peak, 2);
  EXPECT_EQ(fallback_lines().size(), 6u);
}

}  // namespace
}  // namespace ccpool::client
