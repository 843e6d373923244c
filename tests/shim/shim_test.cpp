// Real-process tests of libccpool-shim.so: every hook redirects compilers to
// the client with the resolved path and the original argv, everything else
// passes through exactly (argv, env, fds, errno).
#include <cerrno>

#include "tests/shim/shim_fixture.h"

namespace ccpool::testing {
namespace {

using Args = std::vector<std::string>;

const char* const kPathModes[] = {"execvp", "execvpe", "execlp", "posix_spawnp"};
const char* const kFileModes[] = {"execve",   "execv", "execl",      "execle",
                                  "execveat", "vfork", "posix_spawn"};

TEST_F(ShimTest, EveryHookRedirectsTheCompiler) {
  int expected_calls = 0;
  for (const char* mode : kPathModes) {
    SCOPED_TRACE(mode);
    ChildOutput r = run_child({probe(), mode, "g++", "g++", "-c", "x.cpp"}, env(), m_dir);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(r.output, "CLIENT\n");
    ++expected_calls;
  }
  for (const char* mode : kFileModes) {
    SCOPED_TRACE(mode);
    ChildOutput r =
        run_child({probe(), mode, m_bin + "/g++", "my-g++", "-O2", "a b.cpp"}, env(), m_dir);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(r.output, "CLIENT\n");
    ++expected_calls;
  }
  auto recorded = calls();
  ASSERT_EQ(recorded.size(), static_cast<size_t>(expected_calls));
  for (size_t i = 0; i < std::size(kPathModes); ++i)
    EXPECT_EQ(recorded[i], (Args{m_bin + "/g++", "g++", "-c", "x.cpp"})) << kPathModes[i];
  for (size_t i = 0; i < std::size(kFileModes); ++i) {
    EXPECT_EQ(recorded[std::size(kPathModes) + i],
              (Args{m_bin + "/g++", "my-g++", "-O2", "a b.cpp"}))
        << kFileModes[i];
  }
}

TEST_F(ShimTest, PathSearchSkipsNonExecutableAndDirectoryEntries) {
  std::string first = m_dir + "/first", second = m_dir + "/second";
  ::mkdir(first.c_str(), 0755);
  ::mkdir(second.c_str(), 0755);
  ::mkdir((first + "/g++").c_str(), 0755);                     // a directory: EACCES, skipped
  write_text(second + "/g++", "#!/bin/sh\necho NOX\n", 0644);  // not executable: skipped
  EnvVars e = env();
  e["PATH"] = first + ":" + second + ":" + m_bin;
  for (const char* mode : kPathModes) {
    ChildOutput r = run_child({probe(), mode, "g++", "g++"}, e, m_dir);
    EXPECT_EQ(r.output, "CLIENT\n") << mode;
  }
  for (const auto& call : calls()) EXPECT_EQ(call, (Args{m_bin + "/g++", "g++"}));
}

TEST_F(ShimTest, ErrnoIsTheRealOne) {
  std::string noexec = m_dir + "/noexec";
  ::mkdir(noexec.c_str(), 0755);
  write_text(noexec + "/g++", "#!/bin/sh\n", 0644);
  struct Case {
    std::string path_env, file;
    int err;
  };
  const Case cases[] = {
      {m_dir + "/empty", "g++", ENOENT},  // p-variants: nothing on PATH
      {noexec, "g++", EACCES},            // p-variants: found, not executable
      {"/usr/bin", m_dir + "/missing/g++", ENOENT},
      {"/usr/bin", noexec + "/g++", EACCES},
      {"/usr/bin", "/etc/passwd/g++", ENOTDIR},
      {"/usr/bin", "/etc/passwd/ls", ENOTDIR},  // a non-compiler too
  };
  for (const Case& c : cases) {
    bool p_form = c.file.find('/') == std::string::npos;
    for (const char* mode :
         p_form ? std::vector<const char*>(std::begin(kPathModes), std::end(kPathModes))
                : std::vector<const char*>(std::begin(kFileModes), std::end(kFileModes))) {
      SCOPED_TRACE(std::string(mode) + " " + c.file);
      for (bool preload : {false, true}) {
        EnvVars e = env(preload);
        e["PATH"] = c.path_env;
        ChildOutput r = run_child({probe(), mode, c.file, "g++"}, e, m_dir);
        EXPECT_EQ(r.exit_code, 100);
        EXPECT_EQ(r.output, "ERRNO " + std::to_string(c.err) + "\n");
      }
    }
  }
  EXPECT_TRUE(calls().empty());
}

TEST_F(ShimTest, NonCompilersPassThroughExactly) {
  // A non-compiler that reports argv, one variable, and writes to inherited fd 7.
  write_text(m_bin + "/show", "#!/bin/sh\necho \"$0|$*|$PROBE_VAR\"\necho via-fd >&7\n", 0755);
  std::string fd_file = m_dir + "/fd7";
  for (const char* mode : {"execvp", "posix_spawnp", "execve", "posix_spawn", "vfork", "execl"}) {
    SCOPED_TRACE(mode);
    std::string file = std::string(mode).back() == 'p' ? "show" : m_bin + "/show";
    std::string outputs[2];
    for (bool preload : {false, true}) {
      int fd = ::open(fd_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 7);
      ::close(fd);
      EnvVars e = env(preload);
      e["PROBE_VAR"] = "v a l";
      ChildOutput r = run_child({probe(), mode, file, "zeroth", "a", "b c"}, e, m_dir, 7);
      ::close(7);
      EXPECT_EQ(r.exit_code, 0);
      EXPECT_EQ(slurp(fd_file), "via-fd\n");
      outputs[preload] = r.output;
    }
    EXPECT_EQ(outputs[0], outputs[1]);
    EXPECT_NE(outputs[1].find("|a b c|v a l"), std::string::npos) << outputs[1];
  }
  EXPECT_TRUE(calls().empty());
}

TEST_F(ShimTest, DisabledPassesEverythingThrough) {
  EnvVars e = env();
  e["CCPOOL_DISABLE"] = "1";
  for (const char* mode : {"execvp", "posix_spawnp", "execve"}) {
    std::string file = std::string(mode) == "execve" ? m_bin + "/g++" : "g++";
    ChildOutput r = run_child({probe(), mode, file, "g++", "-c"}, e, m_dir);
    EXPECT_EQ(r.output, "REAL g++ -c\n") << mode;
  }
  EXPECT_TRUE(calls().empty());
}

TEST_F(ShimTest, MissingClientFallsBackToTheRealProgram) {
  EnvVars e = env();
  e["CCPOOL_CLIENT"] = m_dir + "/no-such-client";
  for (const char* mode : {"execvp", "posix_spawnp", "execve", "posix_spawn"}) {
    std::string file = std::string(mode).back() == 'p' ? "g++" : m_bin + "/g++";
    ChildOutput r = run_child({probe(), mode, file, "g++", "-c"}, e, m_dir);
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_EQ(r.output, "REAL g++ -c\n") << mode;
  }
}

TEST_F(ShimTest, CompilerListFromEnvironmentReplacesTheDefault) {
  write_text(m_bin + "/mycc", "#!/bin/sh\necho REAL mycc\n", 0755);
  EnvVars e = env();
  e["CCPOOL_COMPILERS"] = "my*,nvcc";
  EXPECT_EQ(run_child({probe(), "execvp", "mycc", "mycc"}, e, m_dir).output, "CLIENT\n");
  EXPECT_EQ(run_child({probe(), "execvp", "g++", "g++"}, e, m_dir).output, "REAL g++\n");
  ASSERT_EQ(calls().size(), 1u);
  EXPECT_EQ(calls()[0], (Args{m_bin + "/mycc", "mycc"}));
}

TEST_F(ShimTest, InductorSidecarWorkersAreCapped) {
  std::string dir = m_dir + "/site/torch/_inductor/compile_worker";
  ASSERT_EQ(std::system(("mkdir -p '" + dir + "'").c_str()), 0);
  std::string sidecar = dir + "/__main__.py";
  write_text(sidecar, "echo \"$*\"\n", 0644);  // run by sh, standing in for python
  EnvVars e = env();
  e["CCPOOL_WORKERS"] = "4";
  for (const char* mode : {"execve", "execvp", "posix_spawnp", "vfork"}) {
    std::string file = std::string(mode).back() == 'p' ? "sh" : "/bin/sh";
    ChildOutput r =
        run_child({probe(), mode, file, "sh", sidecar, "--kind=fork", "--workers=32", "--parent=1"},
                  e, m_dir);
    EXPECT_EQ(r.output, "--kind=fork --workers=4 --parent=1\n") << mode;
  }
  // Fewer than the share: kept. No CCPOOL_WORKERS: untouched.
  EXPECT_EQ(
      run_child({probe(), "execve", "/bin/sh", "sh", sidecar, "--workers=2"}, e, m_dir).output,
      "--workers=2\n");
  e.erase("CCPOOL_WORKERS");
  EXPECT_EQ(
      run_child({probe(), "execve", "/bin/sh", "sh", sidecar, "--workers=32"}, e, m_dir).output,
      "--workers=32\n");
  EXPECT_TRUE(calls().empty());
}

// The hooks run on the caller's stack: a thread with a 64 KiB stack (Java,
// Go's cgo threads, musl's default is 128 KiB) must be able to exec a compiler.
TEST_F(ShimTest, HooksFitOnA64KiBThreadStack) {
  ChildOutput r = run_child({probe(), "thread-execvp", "g++", "g++", "-c", "x.cpp"}, env(), m_dir);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "CLIENT\n");
  ASSERT_EQ(calls().size(), 1u);
  EXPECT_EQ(calls()[0], (Args{m_bin + "/g++", "g++", "-c", "x.cpp"}));
}

// NULL is EFAULT, as the kernel says for execve, never a crash in the shim.
TEST_F(ShimTest, NullPathIsEfault) {
  EXPECT_EQ(run_child({probe(), "null-execve", "-", "g++"}, env(false), m_dir).output,
            "ERRNO 14\n");
  for (const char* mode :
       {"null-execve", "null-execvp", "null-execveat", "null-posix_spawn", "null-posix_spawnp"}) {
    ChildOutput r = run_child({probe(), mode, "-", "g++"}, env(), m_dir);
    EXPECT_EQ(r.output, "ERRNO 14\n") << mode;
    EXPECT_EQ(r.exit_code, 100) << mode;
  }
  EXPECT_TRUE(calls().empty());
}

// The socket the process started with travels on the client's argv, so an
// exec with a cleaned environment still reaches the same service.
TEST_F(ShimTest, SocketSeenAtLoadIsPassedToTheClient) {
  EnvVars e = env();
  e["XDG_RUNTIME_DIR"] = "/run/x";
  run_child({probe(), "execvp", "g++", "g++", "-c"}, e, m_dir);
  e["CCPOOL_SOCKET"] = "/s/sock";
  run_child({probe(), "posix_spawnp", "g++", "g++", "-c"}, e, m_dir);
  auto recorded = calls();
  ASSERT_EQ(recorded.size(), 2u);
  EXPECT_EQ(recorded[0],
            (Args{"--inherited-socket=/run/x/ccpool/sock", m_bin + "/g++", "g++", "-c"}));
  EXPECT_EQ(recorded[1], (Args{"--inherited-socket=/s/sock", m_bin + "/g++", "g++", "-c"}));
}

TEST_F(ShimTest, StaticBinariesBypassTheShim) {
  std::string static_probe = build_binary("shim_exec_probe_static");
  if (::access(static_probe.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "SKIP: no static libc (libc.a), shim_exec_probe_static not built\n");
    std::_Exit(125);
  }
  ChildOutput r = run_child({static_probe, "execvp", "g++", "g++", "-c"}, env(), m_dir);
  EXPECT_EQ(r.output, "REAL g++ -c\n");
  EXPECT_TRUE(calls().empty());
}

}  // namespace
}  // namespace ccpool::testing
