// write_output(): outputs land as the compiler would leave them.
#include "service/delivery.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "base/fs.h"
#include "tests/support/scratch.h"

namespace ccpool::service {
namespace {

std::string scratch(const std::string& name) {
  return testing::scratch_dir() + "/" + name;
}

mode_t mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode;
}

TEST(WriteOutput, NewFileGetsTheModeAndBytes) {
  std::string path = scratch("new.o");
  ASSERT_TRUE(write_output(path, "bytes", 0640));
  EXPECT_EQ(*read_file(path), "bytes");
  EXPECT_EQ(mode_of(path) & 07777, 0640u);
}

TEST(WriteOutput, ReplacesADifferentRegularFile) {
  std::string path = scratch("old.o");
  ASSERT_TRUE(write_file_atomic(path, "old", 0600));
  ASSERT_TRUE(write_output(path, "new bytes", 0644));
  EXPECT_EQ(*read_file(path), "new bytes");
  EXPECT_EQ(mode_of(path) & 07777, 0644u);
}

TEST(WriteOutput, SymlinkIsWrittenThroughAndKept) {
  std::string dir = scratch("real");
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  std::string link = scratch("k.so");
  ASSERT_EQ(::symlink("real/k.so", link.c_str()), 0);  // dangling: the target is created
  ASSERT_TRUE(write_output(link, "first", 0755));
  EXPECT_TRUE(S_ISLNK(mode_of(link)));
  EXPECT_EQ(*read_file(dir + "/k.so"), "first");
  ASSERT_TRUE(write_output(link, "second", 0755));  // an existing target is replaced
  EXPECT_TRUE(S_ISLNK(mode_of(link)));
  EXPECT_EQ(*read_file(dir + "/k.so"), "second");
}

TEST(WriteOutput, SymlinkLoopIsAnErrorNamingThePath) {
  std::string a = scratch("a"), b = scratch("b");
  ASSERT_EQ(::symlink("b", a.c_str()), 0);
  ASSERT_EQ(::symlink("a", b.c_str()), 0);
  auto written = write_output(a, "x", 0644);
  ASSERT_FALSE(written);
  EXPECT_NE(written.error().message.find("symlinks"), std::string::npos) << written.error().message;
}

TEST(WriteOutput, FifoIsWrittenInPlace) {
  std::string fifo = scratch("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  UniqueFd reader(::open(fifo.c_str(), O_RDONLY | O_NONBLOCK));
  ASSERT_TRUE(reader);
  ASSERT_TRUE(write_output(fifo, "through the pipe", 0644));
  char buf[64] = {};
  ASSERT_EQ(::read(reader.get(), buf, sizeof(buf)), 16);
  EXPECT_EQ(std::string(buf), "through the pipe");
  EXPECT_TRUE(S_ISFIFO(mode_of(fifo)));
  EXPECT_EQ(mode_of(fifo) & 07777, 0600u);  // never chmodded
}

TEST(WriteOutput, FifoWithoutReaderFailsInsteadOfBlocking) {
  std::string fifo = scratch("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FALSE(write_output(fifo, "nobody reads", 0644));
  EXPECT_TRUE(S_ISFIFO(mode_of(fifo)));
}

TEST(WriteOutput, CharacterDeviceIsNeverReplaced) {
  if (::geteuid() != 0) GTEST_SKIP() << "mknod of a character device needs root";
  std::string null = scratch("null");
  ASSERT_EQ(::mknod(null.c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);
  mode_t before = mode_of(null);
  ASSERT_TRUE(write_output(null, "object bytes", 0644));
  EXPECT_EQ(mode_of(null), before);
}

TEST(DeliveredMode, FollowsTheUmaskAndNeverSetsSpecialBits) {
  EXPECT_EQ(delivered_mode(0644, 022), 0644u);
  EXPECT_EQ(delivered_mode(0755, 022), 0755u);
  EXPECT_EQ(delivered_mode(0755, 077), 0700u);
  EXPECT_EQ(delivered_mode(07777, 0), 0777u);
}

// A hit's mode is the one the compiler itself gives under the requester's
// umask: an object and a shared object built by the service under its own
// umask, delivered to requesters with other umasks, against g++ run
// directly under each (issue 29: a behaviour check, not only the table).
TEST(DeliveredMode, MatchesWhatTheCompilerCreatesUnderTheRequestersUmask) {
  ASSERT_EQ(::access("/usr/bin/g++", X_OK), 0)
      << "/usr/bin/g++ is missing: run scripts/setup-deps.sh";
  std::string dir = testing::scratch_dir();
  ASSERT_TRUE(write_file_atomic(dir + "/k.cpp", "extern \"C\" int k() { return 1; }\n", 0644));
  auto build = [&](const std::string& umask, const std::string& args, const std::string& out) {
    std::string cmd =
        "cd '" + dir + "' && umask " + umask + " && /usr/bin/g++ " + args + " k.cpp -o " + out;
    return std::system(cmd.c_str());
  };
  for (const auto& [args, name] : {std::pair{"-c", "k.o"}, std::pair{"-shared -fPIC", "k.so"}}) {
    ASSERT_EQ(build("022", args, std::string("stored.") + name), 0);  // the service's run
    uint32_t stored = mode_of(dir + "/stored." + name) & 0777;
    Result<std::string> bytes = read_file(dir + "/stored." + name);
    ASSERT_TRUE(bytes);
    for (uint32_t umask : {022u, 027u, 077u, 002u}) {
      char text[8];
      std::snprintf(text, sizeof text, "%03o", umask);
      std::string direct = std::string("direct.") + text + "." + name;
      ASSERT_EQ(build(text, args, direct), 0);
      std::string hit = dir + "/hit." + text + "." + name;
      ASSERT_TRUE(write_output(hit, *bytes, delivered_mode(stored, umask)));
      EXPECT_EQ(mode_of(hit) & 07777, mode_of(dir + "/" + direct) & 07777)
          << name << " under umask " << text;
    }
  }
}

// The stored mode carries the leader's umask; a requester gets what the tool
// would create under its own: 0666 or 0777 (executable) less its umask.
TEST(DeliveredMode, IsTheRequestersNotTheLeaders) {
  EXPECT_EQ(delivered_mode(0700, 022), 0755u);  // leader had umask 077
  EXPECT_EQ(delivered_mode(0600, 002), 0664u);
  EXPECT_EQ(delivered_mode(0711, 0), 0777u);
  EXPECT_EQ(delivered_mode(0640, 0), 0666u);
}

}  // namespace
}  // namespace ccpool::service
