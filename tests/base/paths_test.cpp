#include "base/paths.h"

#include <gtest/gtest.h>

namespace ccpool {
namespace {

TEST(Paths, DefaultSocketNameKeepsItsDirectoryAsState) {
  EXPECT_EQ(state_dir_for_socket("/run/user/1000/ccpool/sock"), "/run/user/1000/ccpool");
  EXPECT_EQ(state_dir_for_socket("/sock"), "/");
  EXPECT_EQ(state_dir_for_socket("sock"), ".");
}

TEST(Paths, OtherSocketNamesGetTheirOwnStateDirectory) {
  EXPECT_EQ(state_dir_for_socket("/tmp/x/a.sock"), "/tmp/x/a.sock.d");
  EXPECT_EQ(state_dir_for_socket("/tmp/x/b.sock"), "/tmp/x/b.sock.d");
  EXPECT_NE(state_dir_for_socket("/tmp/x/a.sock"), state_dir_for_socket("/tmp/x/b.sock"));
  // `--socket ~/x.sock` never makes the home directory the state directory.
  EXPECT_EQ(state_dir_for_socket("/home/u/x.sock"), "/home/u/x.sock.d");
  EXPECT_EQ(state_dir_for_socket("/a.sock"), "/a.sock.d");
  EXPECT_EQ(state_dir_for_socket("a.sock"), "./a.sock.d");
  EXPECT_EQ(state_dir_for_socket("/tmp/x/socket"), "/tmp/x/socket.d");
}

}  // namespace
}  // namespace ccpool
