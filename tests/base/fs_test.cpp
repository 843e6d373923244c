#include "base/fs.h"

#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/stat.h>

#include "tests/support/scratch.h"

namespace ccpool {
namespace {

TEST(Fs, AtomicWriteAndRead) {
  std::string path = testing::scratch_dir() + "/file";
  ASSERT_TRUE(write_file_atomic(path, "abc", 0640));
  EXPECT_EQ(*read_file(path), "abc");
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  EXPECT_EQ(read_file(path + ".nope").error().code, ErrorCode::kNotFound);
}

TEST(Fs, ReadFileHeadStopsAtItsBound) {
  std::string path = testing::scratch_dir() + "/file";
  std::string text(200 * 1024, 'x');
  text.replace(0, 4, "CPCH");
  ASSERT_TRUE(write_file_atomic(path, text, 0644));
  EXPECT_EQ(*read_file_head(path, 4), "CPCH");
  EXPECT_EQ(read_file_head(path, 100 * 1024)->size(), 100u * 1024);  // past one 64 KiB read
  EXPECT_EQ(*read_file_head(path, 1 << 20), text);  // shorter than the bound: all of it
  EXPECT_EQ(*read_file_head(path, 0), "");
  EXPECT_EQ(read_file_head(path + ".nope", 4).error().code, ErrorCode::kNotFound);
}

TEST(Fs, PrivateDirCreatedAndChecked) {
  std::string dir = testing::scratch_dir() + "/a/b";
  ASSERT_TRUE(ensure_private_dir(dir));
  struct stat st;
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  auto r = ensure_private_dir(dir);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kPermission);
  EXPECT_NE(r.error().message.find("chmod 700"), std::string::npos);
}

// A parent others may write without the sticky bit lets them swap the
// directory for their own: refused, naming that parent.
TEST(Fs, PrivateDirUnderAWorldWritableParentIsRefused) {
  std::string parent = testing::scratch_dir() + "/open";
  std::string dir = parent + "/state";
  ASSERT_TRUE(ensure_private_dir(dir));
  ASSERT_EQ(::chmod(parent.c_str(), 0777), 0);
  auto r = ensure_private_dir(dir);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kPermission);
  EXPECT_NE(r.error().message.find("'" + parent + "'"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("chmod o-w"), std::string::npos) << r.error().message;
  ASSERT_EQ(::chmod(parent.c_str(), 01777), 0);  // sticky, like /tmp: fine
  EXPECT_TRUE(ensure_private_dir(dir));
  ASSERT_EQ(::chmod(parent.c_str(), 0700), 0);
}

TEST(Fs, SecretFilesMustBePrivate) {
  std::string path = testing::scratch_dir() + "/key";
  ASSERT_TRUE(write_file_atomic(path, "k", 0644));
  auto r = read_secret_file(path);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kPermission);
  EXPECT_NE(r.error().message.find("chmod 600 " + path), std::string::npos) << r.error().message;
  ASSERT_EQ(::chmod(path.c_str(), 0400), 0);
  EXPECT_EQ(*read_secret_file(path), "k");
}

TEST(Fs, NetworkFilesystemRefusedThroughSeam) {
  auto fake = [](int64_t magic) {
    return [magic](const std::string&) -> Result<int64_t> { return magic; };
  };
  auto nfs = check_local_filesystem("/x", "CCPOOL_DIR", fake(NFS_SUPER_MAGIC));
  ASSERT_FALSE(nfs);
  EXPECT_EQ(nfs.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(nfs.error().message.find("CCPOOL_DIR"), std::string::npos);
  EXPECT_NE(nfs.error().message.find("NFS"), std::string::npos);
  EXPECT_NE(nfs.error().message.find("/tmp"), std::string::npos);
  EXPECT_FALSE(check_local_filesystem("/x", "CCPOOL_DIR", fake(0x0BD00BD0)));  // Lustre
  EXPECT_FALSE(check_local_filesystem("/x", "CCPOOL_DIR", fake(0x47504653)));  // GPFS
  EXPECT_FALSE(check_local_filesystem("/x", "CCPOOL_DIR", fake(V9FS_MAGIC)));
  EXPECT_TRUE(check_local_filesystem("/x", "CCPOOL_DIR", fake(EXT4_SUPER_MAGIC)));
  EXPECT_TRUE(check_local_filesystem("/x", "CCPOOL_DIR", fake(TMPFS_MAGIC)));
  EXPECT_TRUE(check_local_filesystem(testing::scratch_dir(), "CCPOOL_DIR"));
}

}  // namespace
}  // namespace ccpool
