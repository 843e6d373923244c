// The shim under real tools: CPython's subprocess (vfork + execve per PATH
// entry) and os.posix_spawn, GNU make -j4, and sh -c.
#include "tests/shim/shim_fixture.h"

namespace ccpool::testing {
namespace {

using Args = std::vector<std::string>;

TEST_F(ShimTest, PythonSubprocessAndPosixSpawnAreCaught) {
  const std::string python = "/usr/bin/python3";
  if (::access(python.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "SKIP: %s missing (scripts/setup-deps.sh installs python3)\n",
                 python.c_str());
    std::_Exit(125);
  }
  std::string script =
      "import os, subprocess, shutil\n"
      "subprocess.run(['g++', '-c', 'k.cpp'], check=True)\n"
      "subprocess.run(['g++', '-c', 'k2.cpp'], check=True, close_fds=False)\n"
      "pid = os.posix_spawn(shutil.which('g++'), ['g++', '-O3'], dict(os.environ))\n"
      "os.waitpid(pid, 0)\n"
      "pid = os.posix_spawnp('g++', ['g++', '-O1'], dict(os.environ))\n"
      "os.waitpid(pid, 0)\n";
  ChildOutput r = run_child({python, "-c", script}, env(), m_dir);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  auto recorded = calls();
  ASSERT_EQ(recorded.size(), 4u) << r.output;
  EXPECT_EQ(recorded[0], (Args{m_bin + "/g++", "g++", "-c", "k.cpp"}));
  EXPECT_EQ(recorded[1], (Args{m_bin + "/g++", "g++", "-c", "k2.cpp"}));
  EXPECT_EQ(recorded[2], (Args{m_bin + "/g++", "g++", "-O3"}));
  EXPECT_EQ(recorded[3], (Args{m_bin + "/g++", "g++", "-O1"}));
}

TEST_F(ShimTest, MakeAndShellAreCaught) {
  write_text(m_dir + "/Makefile",
             ".PHONY: all\nall: a.o b.o c.o d.o\n"
             "%.o:\n\tg++ -c $*.cpp\n",
             0644);
  ChildOutput r = run_child({"/usr/bin/make", "-r", "-s", "-j4", "-C", m_dir}, env(), m_dir);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  ChildOutput s = run_child({"/bin/sh", "-c", "cd / && g++ -c shell.cpp"}, env(), m_dir);
  EXPECT_EQ(s.output, "CLIENT\n");
  auto recorded = calls();
  ASSERT_EQ(recorded.size(), 5u) << r.output;
  std::vector<std::string> sources;
  for (size_t i = 0; i < 4; ++i) {
    ASSERT_EQ(recorded[i].size(), 4u);
    EXPECT_EQ(recorded[i][0], m_bin + "/g++");
    sources.push_back(recorded[i][3]);
  }
  std::sort(sources.begin(), sources.end());
  EXPECT_EQ(sources, (Args{"a.cpp", "b.cpp", "c.cpp", "d.cpp"}));
  EXPECT_EQ(recorded[4], (Args{m_bin + "/g++", "g++", "-c", "shell.cpp"}));
}

}  // namespace
}  // namespace ccpool::testing
