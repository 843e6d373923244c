// compiler/validation_memo.cpp at the library level: a kept fact is served
// until the kernel reports a change that could affect it, and nothing is
// kept where changes might not be reported. The end-to-end cases with real
// gcc are tests/e2e/cc_memo_test.py.
#include "compiler/validation_memo.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>

#include "compiler/dir_listing.h"
#include "compiler/file_hasher.h"
#include "tests/support/scratch.h"

namespace ccpool::compiler {
namespace {

void put(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// Most cases learn on the first use, to keep their steps short; the
// service's default (the second use) has its own case below.
ValidationMemo::Options at_once() {
  ValidationMemo::Options options;
  options.learn_at_use = 1;
  return options;
}

// Opens `path` read-write, maps its first 4 bytes shared and writes 'O'
// through the mapping, which no event reports. The descriptor is left open
// in *keep_fd, or closed when keep_fd is null. MAP_FAILED: it could not.
void* write_through_mapping(const std::string& path, int* keep_fd) {
  int fd = ::open(path.c_str(), O_RDWR);
  if (fd < 0) return MAP_FAILED;
  void* map = ::mmap(nullptr, 4, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map != MAP_FAILED) static_cast<char*>(map)[0] = 'O';
  if (keep_fd && map != MAP_FAILED) {
    *keep_fd = fd;
  } else {
    ::close(fd);
  }
  return map;
}

ValidationMemo::Item file_item(const std::string& abs) {
  ValidationMemo::Item item;
  item.abs = abs;
  return item;
}

class ValidationMemoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = std::filesystem::canonical(ccpool::testing::scratch_dir()).string();
    m_memo = ValidationMemo::create(at_once());
    ASSERT_NE(m_memo, nullptr);
  }
  // What a lookup does: sync, ask, and learn what was not served.
  std::optional<Digest> look(const std::string& abs) {
    m_memo->sync();
    std::optional<Digest> kept = m_memo->content(abs);
    if (!kept) m_memo->learn({file_item(abs)}, m_listings, abs);  // one use per path
    return kept;
  }
  Digest digest_of(const std::string& text) { return hash_bytes(text); }

  std::string m_dir;
  DirListings m_listings;
  std::unique_ptr<ValidationMemo> m_memo;
};

TEST_F(ValidationMemoTest, ServedUntilWrittenInPlace) {
  std::string h = m_dir + "/inc/h.h";
  put(h, "one\n");
  EXPECT_EQ(look(h), std::nullopt);  // learned now
  EXPECT_EQ(m_memo->counters().learned, 1u);
  EXPECT_EQ(look(h), digest_of("one\n"));
  EXPECT_EQ(m_memo->counters().served, 1u);
  put(h, "two\n");  // same size, same inode
  EXPECT_EQ(look(h), std::nullopt);
  EXPECT_EQ(look(h), digest_of("two\n"));
}

// A chmod or touch of an entry that no kept fact looked up (the object a hit
// delivers beside its source) moves nothing: the facts are served without a
// walk. The same on a name a fact did look up, or on the file itself, is
// checked, and a change to the file is never served.
TEST_F(ValidationMemoTest, AnUnrelatedEntrysAttributesMoveNothing) {
  std::string h = m_dir + "/src/h.h";
  std::string obj = m_dir + "/src/h.o";
  put(h, "one\n");
  put(obj, "object\n");
  EXPECT_EQ(look(h), std::nullopt);  // learned now
  // Served and verified at this epoch, then the neighbour touched: served
  // again without a walk. Another test's files appearing under /tmp (on h's
  // path) do move the epoch, so a few tries.
  bool unwalked = false;
  for (int i = 0; i < 20 && !unwalked; ++i) {
    EXPECT_EQ(look(h), digest_of("one\n"));
    uint64_t before = m_memo->counters().rechecked;
    ASSERT_EQ(::chmod(obj.c_str(), i % 2 ? 0644 : 0600), 0);
    ASSERT_EQ(::utimensat(AT_FDCWD, obj.c_str(), nullptr, 0), 0);
    EXPECT_EQ(look(h), digest_of("one\n"));
    unwalked = m_memo->counters().rechecked == before;
  }
  EXPECT_TRUE(unwalked);
  uint64_t rechecked = m_memo->counters().rechecked;
  // The source's own attributes: its watch and its directory's report them.
  ASSERT_EQ(::utimensat(AT_FDCWD, h.c_str(), nullptr, 0), 0);
  EXPECT_EQ(look(h), std::nullopt);
  EXPECT_EQ(m_memo->counters().rechecked, rechecked + 1);
  EXPECT_EQ(look(h), digest_of("one\n"));  // learned again
  rechecked = m_memo->counters().rechecked;
  // The directory on the way (search permission): checked, and forgotten.
  ASSERT_EQ(::chmod((m_dir + "/src").c_str(), 0700), 0);
  EXPECT_EQ(look(h), std::nullopt);
  EXPECT_EQ(m_memo->counters().rechecked, rechecked + 1);
  // An edit after the touches of the neighbour is still seen.
  EXPECT_EQ(look(h), digest_of("one\n"));
  ASSERT_EQ(::chmod(obj.c_str(), 0644), 0);
  put(h, "two\n");
  EXPECT_EQ(look(h), std::nullopt);
  EXPECT_EQ(look(h), digest_of("two\n"));
}

// A set of questions all served at one generation is vouched for as a whole
// until anything the memo keeps could have moved: an edit, someone else's
// open of a kept file, a newly kept fact. What moved it is asked in full.
TEST_F(ValidationMemoTest, ASetServedWholeIsVouchedForUntilAnythingMoves) {
  std::string h = m_dir + "/inc/h.h";
  std::string other = m_dir + "/inc/other.h";
  put(h, "one\n");
  put(other, "other\n");
  EXPECT_EQ(look(h), std::nullopt);
  auto serve_set = [&] {
    m_memo->sync();
    uint64_t generation = m_memo->generation();
    ASSERT_EQ(m_memo->content(h), digest_of("one\n"));
    m_memo->note_served("entry", generation);
  };
  // Served, then vouched for. Another test's files appearing under /tmp
  // (watched: on h's path) move it too, so a few tries are allowed.
  auto vouched_after_serving = [&] {
    for (int i = 0; i < 20; ++i) {
      serve_set();
      m_memo->sync();
      if (m_memo->unchanged_since_served("entry")) return true;
    }
    return false;
  };
  EXPECT_TRUE(vouched_after_serving());
  EXPECT_FALSE(m_memo->unchanged_since_served("another entry"));
  EXPECT_GE(m_memo->counters().sets_served, 1u);

  // Someone else reads a kept file: its writer probe is due, so not at once.
  { std::ifstream(h).get(); }
  m_memo->sync();
  EXPECT_FALSE(m_memo->unchanged_since_served("entry"));
  EXPECT_TRUE(vouched_after_serving());  // the probe found no writer

  // A file renamed over a kept one (an editor's save) opens nothing the memo
  // watches: the entry event moves it.
  put(m_dir + "/inc/h.tmp", "one\n");
  ASSERT_EQ(::rename((m_dir + "/inc/h.tmp").c_str(), h.c_str()), 0);
  m_memo->sync();
  EXPECT_FALSE(m_memo->unchanged_since_served("entry"));
  EXPECT_EQ(look(h), std::nullopt);  // the fact is gone with its inode: learned again
  EXPECT_TRUE(vouched_after_serving());

  // A fact kept for another use moves it too.
  EXPECT_EQ(look(other), std::nullopt);
  m_memo->sync();
  EXPECT_FALSE(m_memo->unchanged_since_served("entry"));
  EXPECT_TRUE(vouched_after_serving());

  // A generation read before a change never vouches.
  m_memo->sync();
  uint64_t before_edit = m_memo->generation();
  put(h, "two\n");
  m_memo->sync();
  m_memo->note_served("stale", before_edit);
  EXPECT_FALSE(m_memo->unchanged_since_served("stale"));
  EXPECT_FALSE(m_memo->unchanged_since_served("entry"));
  EXPECT_EQ(look(h), std::nullopt);  // the edit is seen
  EXPECT_EQ(look(h), digest_of("two\n"));
}

TEST_F(ValidationMemoTest, LearnedOnTheSecondUseByDefault) {
  m_memo = ValidationMemo::create({});
  ASSERT_NE(m_memo, nullptr);
  std::string h = m_dir + "/inc/h.h";
  std::string once = m_dir + "/inc/once.h";
  put(h, "one\n");
  put(once, "once\n");
  EXPECT_EQ(look(h), std::nullopt);  // first use: counted, not learned
  EXPECT_EQ(look(once), std::nullopt);
  EXPECT_EQ(m_memo->counters().learned, 0u);
  EXPECT_EQ(m_memo->counters().deferred, 2u);
  EXPECT_EQ(m_memo->counters().watches, 0u);  // nothing read again, nothing watched
  EXPECT_EQ(look(h), std::nullopt);           // second use: learned
  EXPECT_EQ(m_memo->counters().learned, 1u);
  EXPECT_EQ(look(h), digest_of("one\n"));
  put(h, "two\n");  // an edit forgets the fact; the next use learns it again
  EXPECT_EQ(look(h), std::nullopt);
  EXPECT_EQ(look(h), std::nullopt);
  EXPECT_EQ(look(h), digest_of("two\n"));
}

// A caller collects items only for the use that keeps them (learns_next),
// and a call without items still counts a time of its use.
TEST_F(ValidationMemoTest, LearnsNextNamesTheUseThatKeeps) {
  m_memo = ValidationMemo::create({});
  ASSERT_NE(m_memo, nullptr);
  std::string h = m_dir + "/inc/h.h";
  put(h, "one\n");
  EXPECT_FALSE(m_memo->learns_next("object a"));
  m_memo->learn({}, m_listings, "object a");  // its first hit: nothing collected
  EXPECT_EQ(m_memo->counters().deferred, 1u);
  EXPECT_TRUE(m_memo->learns_next("object a"));
  EXPECT_FALSE(m_memo->learns_next("object b"));
  m_memo->learn({file_item(h)}, m_listings, "object a");
  EXPECT_EQ(m_memo->counters().learned, 1u);
  EXPECT_FALSE(m_memo->learns_next("object a"));  // counted afresh from here
  m_memo->sync();
  EXPECT_EQ(m_memo->content(h), digest_of("one\n"));
}

// What a miss recorded is kept at once, whatever the use count; an edit
// still forgets it.
TEST_F(ValidationMemoTest, LearnNowKeepsAMissRecordAtOnce) {
  m_memo = ValidationMemo::create({});
  ASSERT_NE(m_memo, nullptr);
  std::string h = m_dir + "/inc/h.h";
  put(h, "one\n");
  m_memo->learn_now({file_item(h)}, m_listings);
  EXPECT_EQ(m_memo->counters().learned, 1u);
  EXPECT_EQ(m_memo->counters().deferred, 0u);
  m_memo->sync();
  EXPECT_EQ(m_memo->content(h), digest_of("one\n"));
  put(h, "two\n");
  m_memo->sync();
  EXPECT_EQ(m_memo->content(h), std::nullopt);
}

// A header that two objects include, each hit once (a tree's warm rebuild):
// two uses of it, but each use came once, so nothing is learned; the
// second hit of one object learns it.
TEST_F(ValidationMemoTest, AFactSharedByUsesThatCameOnceIsNotLearned) {
  m_memo = ValidationMemo::create({});
  ASSERT_NE(m_memo, nullptr);
  std::string h = m_dir + "/inc/h.h";
  put(h, "one\n");
  m_memo->learn({file_item(h)}, m_listings, "object a");
  m_memo->learn({file_item(h)}, m_listings, "object b");
  EXPECT_EQ(m_memo->counters().learned, 0u);
  EXPECT_EQ(m_memo->counters().watches, 0u);
  m_memo->learn({file_item(h)}, m_listings, "object a");
  EXPECT_EQ(m_memo->counters().learned, 1u);
  m_memo->sync();
  EXPECT_EQ(m_memo->content(h), digest_of("one\n"));
}

TEST_F(ValidationMemoTest, HardLinkAndRenameAreSeen) {
  std::string h = m_dir + "/inc/h.h";
  put(h, "one\n");
  look(h);
  ASSERT_EQ(look(h), digest_of("one\n"));
  ASSERT_EQ(::link(h.c_str(), (m_dir + "/alias.h").c_str()), 0);
  // A new name elsewhere changes nothing here (the inode's link count is an attribute: refused
  // once).
  look(h);
  put(m_dir + "/alias.h", "via link\n");
  EXPECT_EQ(look(h), std::nullopt);
  EXPECT_EQ(look(h), digest_of("via link\n"));
  put(m_dir + "/other.h", "replaced\n");
  ASSERT_EQ(::rename((m_dir + "/other.h").c_str(), h.c_str()), 0);
  EXPECT_EQ(look(h), std::nullopt);
  EXPECT_EQ(look(h), digest_of("replaced\n"));
}

TEST_F(ValidationMemoTest, WriterThroughSharedMappingIsNeverBelieved) {
  std::string h = m_dir + "/h.h";
  put(h, "one\n");
  look(h);
  ASSERT_EQ(look(h), digest_of("one\n"));
  void* map = write_through_mapping(h, nullptr);
  ASSERT_NE(map, MAP_FAILED);
  uint64_t probes = m_memo->counters().probes;
  EXPECT_EQ(look(h), std::nullopt);  // opened since: probed, a writer holds it
  EXPECT_EQ(m_memo->counters().probes, probes + 1);
  EXPECT_EQ(look(h), std::nullopt);  // still mapped writable: not learned either
  ::munmap(map, 4);
  EXPECT_EQ(look(h), std::nullopt);  // learned once the mapping is gone
  EXPECT_EQ(look(h), digest_of("One\n"));
}

// An open alone does not move the memo's epoch (readers' opens would make
// every fact be checked in full again), so a fact found valid just before a
// writer opened the file must still see that open: the writer here has not
// closed it, and its write through the mapping reports nothing.
TEST_F(ValidationMemoTest, AWriterOpenedAfterAServedUseIsProbed) {
  std::string h = m_dir + "/h.h";
  put(h, "one\n");
  look(h);
  ASSERT_EQ(look(h), digest_of("one\n"));
  ASSERT_EQ(look(h), digest_of("one\n"));  // found valid at the current epoch
  int fd = -1;
  void* map = write_through_mapping(h, &fd);
  ASSERT_NE(map, MAP_FAILED);
  uint64_t probes = m_memo->counters().probes;
  EXPECT_EQ(look(h), std::nullopt);
  EXPECT_EQ(m_memo->counters().probes, probes + 1);
  ::munmap(map, 4);
  ::close(fd);
  EXPECT_EQ(look(h), std::nullopt);
  EXPECT_EQ(look(h), digest_of("One\n"));
}

// A reader's open costs one writer probe at the next use, and nothing after.
TEST_F(ValidationMemoTest, AReadersOpenCostsOneProbe) {
  std::string h = m_dir + "/h.h";
  put(h, "one\n");
  look(h);
  ASSERT_EQ(look(h), digest_of("one\n"));
  int fd = ::open(h.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ::close(fd);
  uint64_t probes = m_memo->counters().probes;
  EXPECT_EQ(look(h), digest_of("one\n"));
  EXPECT_EQ(look(h), digest_of("one\n"));
  EXPECT_EQ(m_memo->counters().probes, probes + 1);
}

TEST_F(ValidationMemoTest, NothingKeptWithoutEvents) {
  ValidationMemo::Options options = at_once();
  options.drop_events = true;
  m_memo = ValidationMemo::create(std::move(options));
  ASSERT_NE(m_memo, nullptr);
  std::string h = m_dir + "/h.h";
  put(h, "one\n");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(look(h), std::nullopt);
  EXPECT_EQ(m_memo->counters().learned, 0u);
  EXPECT_EQ(m_memo->counters().refused, 3u);
}

TEST_F(ValidationMemoTest, UnwatchedFilesystemIsNeverKept) {
  ValidationMemo::Options options = at_once();
  options.reports_events = [](int64_t) { return false; };
  m_memo = ValidationMemo::create(std::move(options));
  ASSERT_NE(m_memo, nullptr);
  std::string h = m_dir + "/h.h";
  put(h, "one\n");
  EXPECT_EQ(look(h), std::nullopt);
  EXPECT_EQ(look(h), std::nullopt);
  EXPECT_EQ(m_memo->counters().learned, 0u);
}

// A service that is not root cannot take a lease on a file it does not own
// (a root-owned system header): that file is never kept, and learning it is
// not tried again, probe and all, until its owner or mode may have changed.
TEST_F(ValidationMemoTest, ALeaseRefusedAsNotOursIsNotProbedAgainUntilAnAttributeChanges) {
  int probes = 0;
  ValidationMemo::Options options = at_once();
  options.read_lease = [&](int) {
    ++probes;
    return EACCES;
  };
  m_memo = ValidationMemo::create(std::move(options));
  ASSERT_NE(m_memo, nullptr);
  std::string h = m_dir + "/h.h";
  put(h, "one\n");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(look(h), std::nullopt);
  EXPECT_EQ(probes, 1);
  EXPECT_EQ(m_memo->counters().learned, 0u);
  EXPECT_EQ(m_memo->counters().refused, 3u);
  ASSERT_EQ(::chmod(h.c_str(), 0640), 0);  // IN_ATTRIB: the owner or mode may have changed
  EXPECT_EQ(look(h), std::nullopt);
  EXPECT_EQ(probes, 2);
}

TEST_F(ValidationMemoTest, NoWatchesPastTheBound) {
  std::string h = m_dir + "/h.h";
  put(h, "one\n");
  size_t depth =
      std::count(m_dir.begin(), m_dir.end(), '/');  // directories from "/" to m_dir's parent
  ValidationMemo::Options options = at_once();
  options.max_watches = depth + 1;  // every directory, not the file
  m_memo = ValidationMemo::create(std::move(options));
  ASSERT_NE(m_memo, nullptr);
  EXPECT_EQ(look(h), std::nullopt);
  EXPECT_EQ(look(h), std::nullopt);
  EXPECT_EQ(m_memo->counters().learned, 0u);
  EXPECT_EQ(m_memo->counters().watches, depth + 1);
  options = at_once();
  options.max_watches = depth + 2;
  m_memo = ValidationMemo::create(std::move(options));
  EXPECT_EQ(look(h), std::nullopt);
  EXPECT_EQ(look(h), digest_of("one\n"));
}

TEST_F(ValidationMemoTest, NegativeAnswerForgottenWhenTheNameAppears) {
  std::string dir = m_dir + "/inc1";
  std::filesystem::create_directories(dir);
  auto ask = [&] {
    m_memo->sync();
    std::optional<std::string> kept = m_memo->answer('n', dir, "h.h");
    if (!kept) {
      ValidationMemo::Item item;
      item.kind = 'n';
      item.abs = dir;
      item.extra = "h.h";
      item.names = {"h.h"};
      item.compute = [&] {
        return m_listings.check(dir, {"h.h"}, {}) ? std::string("1") : std::string("0");
      };
      m_memo->learn({item}, m_listings, dir);
    }
    return kept;
  };
  EXPECT_EQ(ask(), std::nullopt);
  EXPECT_EQ(ask(), "1");
  put(dir + "/unrelated.h", "x\n");
  EXPECT_EQ(ask(), "1");  // another name: still served
  put(dir + "/h.h", "x\n");
  EXPECT_EQ(ask(), std::nullopt);
  EXPECT_EQ(ask(), "0");
}

}  // namespace
}  // namespace ccpool::compiler
