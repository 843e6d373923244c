// The textual quote-include scan and the per-directory absence checks that
// the direct-mode negative-path rule relies on (docs/cache-keys.md).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "compiler/dir_listing.h"
#include "compiler/include_scan.h"
#include "tests/compiler/executor.h"
#include "tests/support/scratch.h"

namespace ccpool::compiler::testing {
namespace {

using Spellings = std::set<std::string>;

TEST(IncludeScan, CollectsQuoteSpellingsOnly) {
  IncludeScan s = scan_includes(
      "#include \"a.h\"\n#include <b.h>\n  #  include_next \"sub/c.h\"\n#import \"d.h\"\n"
      "#include\"e.h\"\n%:include \"f.h\"\n");
  EXPECT_FALSE(s.opaque);
  EXPECT_EQ(s.quote, (Spellings{"a.h", "sub/c.h", "d.h", "e.h", "f.h"}));
}

TEST(IncludeScan, SplicedDirectiveIsRead) {
  IncludeScan s = scan_includes("#inc\\\nlude \"split.h\"\n# \\  \ninclude \\\n\"g.h\"\n");
  EXPECT_FALSE(s.opaque);
  EXPECT_EQ(s.quote, (Spellings{"split.h", "g.h"}));
}

TEST(IncludeScan, MacroOrCommentInDirectiveIsOpaque) {
  EXPECT_TRUE(scan_includes("#define H \"h.h\"\n#include H\n").opaque);
  EXPECT_TRUE(scan_includes("  # include HEADER(x)\n").opaque);
  EXPECT_TRUE(scan_includes("#include /* why */ \"h.h\"\n").opaque);
  EXPECT_TRUE(scan_includes("# /**/ include M\n").opaque);
  EXPECT_TRUE(scan_includes("/* c */ #include M\n").opaque);
  EXPECT_TRUE(scan_includes("%:include M\n").opaque);
  EXPECT_TRUE(scan_includes("#incl\\\nude M\n").opaque);
  EXPECT_TRUE(scan_includes("??=include \"t.h\"\n").opaque);  // trigraph '#'
}

TEST(IncludeScan, ProseIsNotADirective) {
  // glibc's <limits.h> has "#include's" in a comment; prose and paths name
  // the word without being a directive.
  IncludeScan s = scan_includes(
      "/* #include's protect themselves */\n// we include everything\n"
      "/* see /usr/include/stdio.h */\nint included = 1; bool importance;\n");
  EXPECT_FALSE(s.opaque);
  EXPECT_TRUE(s.quote.empty());
}

TEST(IncludeScan, SystemHeadersAreReadable) {
  // The libstdc++ and glibc headers a kernel includes must not force the
  // conservative rule (that is the whole point of the scan).
  for (const char* h : {"/usr/include/c++/12/vector", "/usr/include/c++/12/cmath", "/usr/include/stdlib.h",
                        "/usr/include/limits.h", "/usr/lib/gcc/x86_64-linux-gnu/12/include/omp.h"}) {
    if (::access(h, R_OK) != 0) continue;
    EXPECT_FALSE(scan_includes(read_text(h)).opaque) << h;
  }
}

TEST(DirListings, MissingParentAndListedNames) {
  std::string dir = ::ccpool::testing::scratch_dir();
  DirListings listings;
  EXPECT_TRUE(listings.none_regular(dir + "/nope", {"a.h", "b.h"}));
  EXPECT_TRUE(listings.none_regular(dir + "/nope/deeper", {"a.h"}));
  write_text(dir + "/d/a.h", "");
  std::filesystem::create_directories(dir + "/d/sub.h");
  EXPECT_FALSE(listings.none_regular(dir + "/d", {"x.h", "a.h"}));
  EXPECT_TRUE(listings.none_regular(dir + "/d", {"x.h", "sub.h"}));  // a directory is not a header
  std::filesystem::create_symlink(dir + "/d/a.h", dir + "/d/link.h");
  EXPECT_FALSE(listings.none_regular(dir + "/d", {"link.h"}));  // followed, like the compiler does
  write_text(dir + "/file", "");
  EXPECT_TRUE(listings.none_regular(dir + "/file", {"a.h"}));  // ENOTDIR
}

TEST(DirListings, MemoizedListingSeesNewEntries) {
  std::string dir = ::ccpool::testing::scratch_dir();
  std::filesystem::create_directories(dir + "/inc");
  write_text(dir + "/inc/other.h", "");
  ::sleep(3);  // age the directory past the racy window so its listing is memoized
  DirListings listings;
  EXPECT_TRUE(listings.none_regular(dir + "/inc", {"h.h"}));
  EXPECT_TRUE(listings.none_regular(dir + "/inc", {"h.h"}));
  EXPECT_EQ(listings.reads(), 1u);  // the second check used the memo
  write_text(dir + "/inc/h.h", "");  // changes the directory's mtime and ctime
  EXPECT_FALSE(listings.none_regular(dir + "/inc", {"h.h"}));
  EXPECT_EQ(listings.reads(), 2u);
  // A fresh (racy) listing is used but not remembered.
  EXPECT_FALSE(listings.none_regular(dir + "/inc", {"h.h"}));
  EXPECT_EQ(listings.reads(), 3u);
}

}  // namespace
}  // namespace ccpool::compiler::testing
