// `ccpool run` with real process trees: nothing survives, the exit status is
// the job's. The test process is itself a child subreaper, so anything that
// escaped `ccpool run` would be re-parented here and counted.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>

#include <climits>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "launch/supervisor.h"
#include "tests/shim/child_process.h"
#include "tests/support/scratch.h"

namespace ccpool::testing {
namespace {

// The tree: a SIGINT-ignoring child, a double-forked orphan, a grandchild in
// its own session; each writes its pid to a file, then the main shell writes
// "ready" and either waits or exits with $2.
constexpr const char* kTree = R"(D=$1
sh -c 'trap "" INT; echo $$ > "$0/ignorer"; exec sleep 1000' "$D" &
sh -c 'sh -c "echo \$\$ > \"\$0/orphan\"; exec sleep 1000" "$0" &' "$D"
sh -c 'setsid sh -c "echo \$\$ > \"\$0/session\"; exec sleep 1000" "$0" &' "$D"
while [ ! -s "$D/ignorer" ] || [ ! -s "$D/orphan" ] || [ ! -s "$D/session" ]; do sleep 0.05; done
echo ready > "$D/ready"
if [ -n "$2" ]; then exit "$2"; fi
wait
)";

class RunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    m_dir = scratch_dir();
    write_text(m_dir + "/tree.sh", kTree, 0644);
  }

  void TearDown() override {
    for (int pid : tree_pids()) ::kill(pid, SIGKILL);  // only matters on failure
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
  }

  EnvVars env() const {
    return {{"PATH", "/usr/bin:/bin"}, {"CCPOOL_RUN_NO_SERVICE", "1"}, {"CCPOOL_JOBS", "2"}};
  }

  pid_t start_run(const std::string& exit_arg) {
    std::vector<std::string> argv{build_binary("ccpool"), "run", "--grace", "1s", "--", "/bin/sh",
                                  m_dir + "/tree.sh",     m_dir};
    if (!exit_arg.empty()) argv.push_back(exit_arg);
    return spawn_child(argv, env(), -1);
  }

  // Polls for the ready file; a bound on polls, not a timing assertion.
  bool wait_ready() const {
    for (int i = 0; i < 600; ++i) {
      if (!slurp(m_dir + "/ready").empty()) return true;
      ::usleep(50 * 1000);
    }
    return false;
  }

  std::vector<int> tree_pids() const {
    std::vector<int> pids;
    for (const char* name : {"ignorer", "orphan", "session"}) {
      int pid = std::atoi(slurp(m_dir + "/" + name).c_str());
      if (pid > 0) pids.push_back(pid);
    }
    return pids;
  }

  // A pid that is gone, or a zombie not ours to reap, counts as dead.
  static bool alive(int pid) {
    if (::kill(pid, 0) != 0) return false;
    std::string stat = slurp("/proc/" + std::to_string(pid) + "/stat");
    size_t close = stat.rfind(')');
    return close != std::string::npos && stat.size() > close + 2 && stat[close + 2] != 'Z';
  }

  void expect_nothing_left() {
    std::vector<int> pids = tree_pids();
    EXPECT_EQ(pids.size(), 3u);
    for (int pid : pids) EXPECT_FALSE(alive(pid)) << "pid " << pid << " survived";
    EXPECT_EQ(launch::list_descendants().size(), 0u);
  }

  std::string m_dir;
};

TEST_F(RunTest, SigintKillsTheWholeTreeAndExits130) {
  pid_t run = start_run("");
  ASSERT_GT(run, 0);
  ASSERT_TRUE(wait_ready());
  for (int pid : tree_pids()) EXPECT_TRUE(alive(pid));
  ::kill(run, SIGINT);
  EXPECT_EQ(wait_exit_code(run), 130);
  expect_nothing_left();
}

TEST_F(RunTest, SigtermKillsTheWholeTreeAndExits143) {
  pid_t run = start_run("");
  ASSERT_GT(run, 0);
  ASSERT_TRUE(wait_ready());
  ::kill(run, SIGTERM);
  EXPECT_EQ(wait_exit_code(run), 143);
  expect_nothing_left();
}

TEST_F(RunTest, NormalExitKeepsStatusAndKillsOrphans) {
  pid_t run = start_run("7");
  ASSERT_GT(run, 0);
  EXPECT_EQ(wait_exit_code(run), 7);
  ASSERT_FALSE(slurp(m_dir + "/ready").empty());
  expect_nothing_left();
}

TEST_F(RunTest, JobIgnoringTheSignalIsKilledAfterGrace) {
  write_text(m_dir + "/stubborn.sh", "trap '' INT\necho ready > \"$1/ready\"\nexec sleep 1000\n");
  pid_t run = spawn_child(
      {build_binary("ccpool"), "run", "--grace", "200ms", "/bin/sh", m_dir + "/stubborn.sh", m_dir},
      env(), -1);
  ASSERT_TRUE(wait_ready());
  ::kill(run, SIGINT);
  EXPECT_EQ(wait_exit_code(run), 130);
  EXPECT_EQ(launch::list_descendants().size(), 0u);
}

// SIGHUP (the terminal went away) is forwarded to the job's process group like SIGINT and
// SIGTERM: the job's own handler runs and its exit status is ccpool run's.
TEST_F(RunTest, SighupIsForwardedToTheJob) {
  write_text(m_dir + "/hup.sh",
             "trap 'echo HUP > \"$1/hup\"; exit 5' HUP\n"
             "echo $$ > \"$1/ignorer\"\n"
             "echo ready > \"$1/ready\"\n"
             "sleep 30\n"  // bounded: a job that never hears the signal exits 9, it does not hang
             "exit 9\n");
  pid_t run = spawn_child(
      {build_binary("ccpool"), "run", "--grace", "10s", "/bin/sh", m_dir + "/hup.sh", m_dir}, env(),
      -1);
  ASSERT_GT(run, 0);
  ASSERT_TRUE(wait_ready());
  ::kill(run, SIGHUP);
  EXPECT_EQ(wait_exit_code(run), 5);
  EXPECT_EQ(slurp(m_dir + "/hup"), "HUP\n");
  EXPECT_EQ(launch::list_descendants().size(), 0u);
}

TEST_F(RunTest, MissingCommandIs127) {
  ChildOutput r =
      run_child({build_binary("ccpool"), "run", "--", "no-such-command-xyz"}, env(), m_dir);
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_NE(r.output.find("'no-such-command-xyz' not found in PATH"), std::string::npos)
      << r.output;
}

TEST_F(RunTest, JobEnvironmentHasFairShareAndKeepsUserValues) {
  std::string show = "echo $TORCHINDUCTOR_COMPILE_THREADS $CCPOOL_WORKERS ${LD_PRELOAD##*/}";
  ChildOutput r = run_child({build_binary("ccpool"), "run", "--ranks", "8", "--jobs", "8",
                             "--no-python-hooks", "--", "/bin/sh", "-c", show},
                            env(), m_dir);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output, "1 1 libccpool-shim.so\n");
  // With the hooks (the default) the node pool bounds the work: jobs threads per rank.
  r = run_child({build_binary("ccpool"), "run", "--ranks", "8", "--jobs", "8", "--", "/bin/sh",
                 "-c", show + " ${PYTHONPATH##*/ccpool/}"},
                env(), m_dir);
  EXPECT_EQ(r.output, "8 1 libccpool-shim.so _bootstrap\n");
  // The hook directory is where ccpool finds it: the build tree mirrors an install.
  r = run_child({build_binary("ccpool"), "run", "--", "/bin/sh", "-c",
                 "test -f ${PYTHONPATH%%:*}/sitecustomize.py"},
                env(), m_dir);
  EXPECT_EQ(r.exit_code, 0) << "no sitecustomize.py in the hook directory on PYTHONPATH";
  EnvVars user = env();
  user["TORCHINDUCTOR_COMPILE_THREADS"] = "32";
  r = run_child({build_binary("ccpool"), "run", "--jobs", "8", "--", "/bin/sh", "-c", show, "sh",
                 "--nproc-per-node", "4"},
                user, m_dir);
  EXPECT_EQ(r.output, "32 2 libccpool-shim.so\n");
}

// `run` and `env` are served by the static front door itself (cli/dispatch.cpp),
// not by exec'ing the dynamically linked ccpool-cli: the job's parent, the
// supervisor, is the `ccpool` binary; and both binaries print the same help.
TEST_F(RunTest, TheFrontDoorServesRunWithoutTheFullCli) {
  ChildOutput r =
      run_child({build_binary("ccpool"), "run", "--", "/bin/sh", "-c", "readlink /proc/$PPID/exe"},
                env(), m_dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  char real[PATH_MAX];
  ASSERT_NE(::realpath(build_binary("ccpool").c_str(), real), nullptr);
  EXPECT_EQ(r.output, std::string(real) + "\n");
  for (std::string command : {"run", "env"}) {
    ChildOutput front = run_child({build_binary("ccpool"), command, "--help"}, env(), m_dir);
    ChildOutput full = run_child({build_binary("ccpool-cli"), command, "--help"}, env(), m_dir);
    EXPECT_EQ(front.exit_code, 0) << front.output;
    EXPECT_EQ(front.output, full.output) << command;
  }
}

TEST_F(RunTest, EnvJsonParses) {
  ChildOutput r = run_child({build_binary("ccpool"), "env", "--shell", "json", "--jobs", "6",
                             "--ranks", "3", "--socket", "/tmp/x/sock"},
                            env(), m_dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto json = nlohmann::json::parse(r.output);
  EXPECT_EQ(json["TORCHINDUCTOR_COMPILE_THREADS"], "6");  // max(2, jobs): the Python hooks are on
  EXPECT_EQ(json["CCPOOL_WORKERS"], "2");                 // the fair share
  EXPECT_EQ(json["CCPOOL_SOCKET"], "/tmp/x/sock");
  std::string shim = json["LD_PRELOAD"];
  EXPECT_EQ(::access(shim.c_str(), R_OK), 0) << shim;
}

// "8x" is refused by `ccpool env` and `ccpool run`, from the flag and from
// CCPOOL_JOBS, with the value and the fix; nothing runs.
TEST_F(RunTest, MalformedJobsAreRefused) {
  for (std::string command : {"env", "run"}) {
    std::vector<std::string> job;
    if (command == "run") job = {"--", "/bin/sh", "-c", "echo ran"};
    std::vector<std::string> argv{build_binary("ccpool"), command, "--jobs", "8x"};
    argv.insert(argv.end(), job.begin(), job.end());
    ChildOutput r = run_child(argv, env(), m_dir);
    EXPECT_EQ(r.exit_code, 2) << command;
    EXPECT_EQ(
        r.output,
        "ccpool: --jobs '8x' is not a positive whole number (1-1000000); give a number of slots, "
        "e.g. --jobs 8\n")
        << command;
    EnvVars bad = env();
    bad["CCPOOL_JOBS"] = "8x";
    argv = {build_binary("ccpool"), command};
    argv.insert(argv.end(), job.begin(), job.end());
    r = run_child(argv, bad, m_dir);
    EXPECT_EQ(r.exit_code, 2) << command;
    EXPECT_EQ(
        r.output,
        "ccpool: CCPOOL_JOBS='8x' is not a positive whole number (1-1000000); unset it or set a "
        "number of slots, e.g. CCPOOL_JOBS=8\n")
        << command;
  }
}

}  // namespace
}  // namespace ccpool::testing
