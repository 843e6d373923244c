// systemd's socket-passing and journal protocols, checked in forked children
// so descriptor 3 and the environment of the test process stay untouched.
#include "service/activation.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>

#include "tests/support/scratch.h"

namespace ccpool::service {
namespace {

int listening_unix(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 4) != 0)
    return -1;
  return fd;
}

// Runs `body` in a child with `fd` on descriptor 3 and LISTEN_* set for the
// child (pid_offset 0) or for another pid; returns its exit code.
int in_child(int fd, const char* count, int pid_offset, const std::function<int()>& body) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (fd >= 0 && fd != 3) ::dup2(fd, 3);
    ::setenv("LISTEN_PID", std::to_string(::getpid() + pid_offset).c_str(), 1);
    ::setenv("LISTEN_FDS", count, 1);
    ::setenv("LISTEN_FDNAMES", "ccpool.socket", 1);
    ::_exit(body());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

bool env_cleared() {
  return !std::getenv("LISTEN_PID") && !std::getenv("LISTEN_FDS") && !std::getenv("LISTEN_FDNAMES");
}

TEST(Activation, TakesTheOnePassedListener) {
  std::string path = testing::scratch_dir() + "/sock";
  int fd = listening_unix(path);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(in_child(fd, "1", 0,
                     [&] {
                       auto taken = take_activation_socket(path);
                       if (!taken || taken->get() != 3) return 1;
                       if (!(::fcntl(3, F_GETFL) & O_NONBLOCK))
                         return 2;  // the hub's accept loop needs it
                       if (!(::fcntl(3, F_GETFD) & FD_CLOEXEC))
                         return 3;  // compilers must not inherit it
                       return env_cleared() ? 0 : 4;
                     }),
            0);
  ::close(fd);
}

TEST(Activation, NotActivatedWhenListenPidNamesAnotherProcess) {
  EXPECT_EQ(in_child(-1, "1", 1,
                     [] {
                       auto taken = take_activation_socket("/nowhere/sock");
                       return taken && !*taken && env_cleared() ? 0 : 1;
                     }),
            0);
  EXPECT_TRUE(take_activation_socket("/nowhere/sock").value().get() < 0);
}

TEST(Activation, RefusesAWrongPathTwoSocketsOrANonListener) {
  std::string dir = testing::scratch_dir();
  int fd = listening_unix(dir + "/other.sock");
  ASSERT_GE(fd, 0);
  EXPECT_EQ(in_child(fd, "1", 0,
                     [&] {
                       auto taken = take_activation_socket(dir + "/sock");
                       if (taken) return 1;
                       std::string want = "systemd passed a socket bound to '" + dir +
                                          "/other.sock' but the service's socket is '" + dir +
                                          "/sock'";
                       return taken.error().message.find(want) == 0 ? 0 : 2;
                     }),
            0);
  EXPECT_EQ(in_child(fd, "2", 0,
                     [&] {
                       auto taken = take_activation_socket(dir + "/other.sock");
                       return !taken && taken.error().message.find("takes exactly one") !=
                                            std::string::npos
                                  ? 0
                                  : 1;
                     }),
            0);
  int file = ::open((dir + "/plain").c_str(), O_CREAT | O_RDWR, 0600);
  EXPECT_EQ(in_child(file, "1", 0,
                     [&] {
                       auto taken = take_activation_socket(dir + "/sock");
                       return !taken &&
                                      taken.error().message.find(
                                          "not a listening Unix stream socket") != std::string::npos
                                  ? 0
                                  : 1;
                     }),
            0);
  ::close(file);
  ::close(fd);
}

TEST(Activation, JournalStreamMatchesOnlyItsOwnStderr) {
  std::string path = testing::scratch_dir() + "/err";
  pid_t pid = ::fork();
  if (pid == 0) {
    int fd = ::open(path.c_str(), O_CREAT | O_WRONLY, 0600);
    ::dup2(fd, 2);
    struct stat st;
    ::fstat(2, &st);
    ::unsetenv("JOURNAL_STREAM");
    if (stderr_is_journal()) ::_exit(1);
    ::setenv("JOURNAL_STREAM",
             (std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino + 1)).c_str(), 1);
    if (stderr_is_journal()) ::_exit(2);
    ::setenv("JOURNAL_STREAM",
             (std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino)).c_str(), 1);
    ::_exit(stderr_is_journal() ? 0 : 3);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace ccpool::service
