// compiler/dir_listing.cpp: the rule for changes inside the timestamp
// granularity (issue 29). A directory's listing is memoized by its stat;
// on a filesystem whose timestamps move in coarse ticks, an entry added in
// the same tick as the listing leaves the stat unchanged. The frozen stat
// below stands for that case (this machine's kernel gives each change a
// fresh fine-grained timestamp, so the race cannot be made for real).
#include "compiler/dir_listing.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "compiler/file_hasher.h"
#include "tests/compiler/executor.h"
#include "tests/support/scratch.h"

namespace ccpool::compiler {
namespace {

std::string g_frozen_dir;
std::optional<FileStat> g_frozen;

std::optional<FileStat> frozen_stat(const std::string& path) {
  if (path == g_frozen_dir) return g_frozen;
  return stat_path(path);
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The directory's stat as it was when first read, with its times set `age_s`
// seconds before now.
void freeze(const std::string& dir, int64_t age_s) {
  g_frozen_dir = dir;
  g_frozen = stat_path(dir);
  ASSERT_TRUE(g_frozen);
  g_frozen->mtime_ns = g_frozen->ctime_ns = now_ns() - age_s * 1'000'000'000;
}

TEST(DirListings, AnEntryAddedWithinTheTimestampTickIsSeen) {
  std::string dir = ::ccpool::testing::scratch_dir() + "/inc";
  std::filesystem::create_directories(dir);
  freeze(dir, 0);  // changed just now: within the racy window
  DirListings listings(frozen_stat);
  EXPECT_TRUE(listings.check(dir, {"h.h"}, {"h.h.gch"}));
  testing::write_text(dir + "/h.h", "\n");  // the stat does not move (same tick)
  EXPECT_FALSE(listings.check(dir, {"h.h"}, {}))
      << "a listing of a directory changed within the tick was reused";
  testing::write_text(dir + "/h.h.gch", "\n");
  EXPECT_FALSE(listings.check(dir, {}, {"h.h.gch"}));
}

// Why the window exists: a listing read from a directory whose stat is old
// is trusted for as long as that stat holds.
TEST(DirListings, AListingOfAnUnchangedDirectoryIsReused) {
  std::string dir = ::ccpool::testing::scratch_dir() + "/inc";
  std::filesystem::create_directories(dir);
  freeze(dir, 10);
  DirListings listings(frozen_stat);
  EXPECT_TRUE(listings.check(dir, {"h.h"}, {}));
  uint64_t reads = listings.reads();
  testing::write_text(dir + "/h.h", "\n");  // the frozen stat hides this change
  EXPECT_TRUE(listings.check(dir, {"h.h"}, {}));
  EXPECT_EQ(listings.reads(), reads);
}

}  // namespace
}  // namespace ccpool::compiler
