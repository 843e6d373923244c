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

using Probes = std::set<HasIncludeProbe>;

TEST(IncludeScan, CollectsAngleSpellings) {
  IncludeScan s = scan_includes("#include <a.h>\n# include_next <sys/b.h>\n#include \"q.h\"\n");
  EXPECT_EQ(s.angle, (Spellings{"a.h", "sys/b.h"}));
  EXPECT_EQ(s.quote, (Spellings{"q.h"}));
}

TEST(IncludeScan, LiteralHasIncludeProbes) {
  IncludeScan s = scan_includes(
      "#if __has_include(<bit>) && __has_include( \"cfg.h\" )\n"
      "#elif defined(X) || __has_include_next(<sys/x.h>)\n"
      "#if __has_include__(<old.h>)\n#endif\n");
  EXPECT_FALSE(s.probe_nonliteral);
  EXPECT_EQ(s.probes, (Probes{{true, false, "bit"}, {false, false, "cfg.h"}, {true, true, "sys/x.h"},
                              {true, false, "old.h"}}));
}

TEST(IncludeScan, FeatureTestsOfHasIncludeAreNotProbes) {
  // gtest-port.h and pybind11 guard their probes like this; a shim defines
  // the operator away where it is missing.
  IncludeScan s = scan_includes(
      "#ifdef __has_include\n#if __has_include(<any>)\n#endif\n#endif  // __has_include\n"
      "#if defined(__has_include) && defined __has_include_next\n#endif\n"
      "#ifndef __has_include\n#define __has_include(x) 0\n#endif\n"
      "#endif /* __has_include(x) */\n"
      "/* Use __has_include(HEADER) to probe,\n   or __has_include_next(H). */\n"
      "// __has_include(FOO)\n");
  EXPECT_FALSE(s.probe_nonliteral);
  EXPECT_EQ(s.probes, (Probes{{true, false, "any"}}));
}

TEST(IncludeScan, NonLiteralProbesAreReported) {
  for (const char* text : {"#define H <x.h>\n#if __has_include(H)\n#endif\n",
                           "#  define FMT_HAS_INCLUDE(x) __has_include(x)\n",
                           "#define HAS __has_include\n",
                           "#define HAS_X __has_include(<foo/x.h>)\n",  // foo may be a macro there
                           "# define HAS(h) (__has_include(<h>))\n",
                           "#if A /* spans\n */ || __has_include(M)\n#endif\n",
                           "#if A /* x // y */ || __has_include(M)\n#endif\n",
                           "#if __has_include(<unterminated\n#endif\n",
                           "#if __has_in\\\nclude(M)\n#endif\n",
                           "#if __has_include /* c */ (<x.h>)\n#endif\n",
                           "#if __has_incl?\?/\nude(<x.h>)\n#endif\n"}) {
    EXPECT_TRUE(scan_includes(text).probe_nonliteral) << text;
  }
  EXPECT_FALSE(scan_includes("const char* s = \"?\?/\";\n").probe_nonliteral);  // not a splice
  IncludeScan quoted = scan_includes("#define HAS_CFG __has_include(\"cfg.h\")\n");  // a string: not expanded
  EXPECT_FALSE(quoted.probe_nonliteral);
  EXPECT_EQ(quoted.probes, (Probes{{false, false, "cfg.h"}}));
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

TEST(DirListings, AbsentPathsAndNameDigests) {
  std::string dir = ::ccpool::testing::scratch_dir();
  DirListings listings;
  EXPECT_TRUE(listings.check(dir + "/nope", {}, {"p.h.gch"}));
  EXPECT_FALSE(listings.names_digest(dir + "/nope"));
  std::filesystem::create_directories(dir + "/d/p.h.gch");
  EXPECT_FALSE(listings.check(dir + "/d", {}, {"p.h.gch"}));  // a directory exists too
  EXPECT_TRUE(listings.check(dir + "/d", {"p.h.gch"}, {"q.h.gch"}));
  std::filesystem::create_symlink(dir + "/d/none", dir + "/d/dangling.gch");
  EXPECT_TRUE(listings.check(dir + "/d", {}, {"dangling.gch"}));  // open(2) would fail
  std::optional<Digest> empty = listings.names_digest(dir + "/d/p.h.gch");
  ASSERT_TRUE(empty);
  write_text(dir + "/d/p.h.gch/a", "");
  std::optional<Digest> one = listings.names_digest(dir + "/d/p.h.gch");
  ASSERT_TRUE(one);
  EXPECT_NE(*empty, *one);
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

// Issue 16: within one lookup, a directory under one the scope saw missing,
// or missing from the listing of one it saw, is known missing without a stat;
// the next lookup (a new scope) stats afresh and sees what appeared.
TEST(DirListings, ScopeInfersMissingDirectoriesFromAncestors) {
  std::string dir = ::ccpool::testing::scratch_dir();
  std::filesystem::create_directories(dir + "/inc");
  std::filesystem::create_directories(dir + "/d2");
  write_text(dir + "/inc/other.h", "");
  write_text(dir + "/d2/h.h", "");
  write_text(dir + "/file", "");
  DirListings listings;
  {
    DirListings::Scope scope(listings);
    EXPECT_TRUE(scope.check(dir + "/inc", {"h.h"}, {}));
    EXPECT_TRUE(scope.check(dir + "/nope", {"h.h"}, {}));
    EXPECT_TRUE(scope.list(dir + "/file").is_dir == false);
    // Appear now, after the scope saw their ancestors: this lookup still
    // answers from what it saw (it never stats them).
    write_text(dir + "/inc/bits/types/h.h", "");
    write_text(dir + "/nope/deeper/h.h", "");
    EXPECT_TRUE(scope.check(dir + "/inc/bits", {"h.h"}, {}));
    EXPECT_TRUE(scope.check(dir + "/inc/bits/types", {"h.h"}, {}));
    EXPECT_TRUE(scope.check(dir + "/nope/deeper", {"h.h"}, {}));
    EXPECT_TRUE(scope.check(dir + "/file/x", {"h.h"}, {}));
    // "..", "." and listed names are stat'ed, never inferred.
    EXPECT_FALSE(scope.check(dir + "/inc/../d2", {"h.h"}, {}));
    EXPECT_FALSE(scope.check(dir + "/inc/./bits/types", {"h.h"}, {}));
    EXPECT_FALSE(scope.check(dir + "/d2", {"h.h"}, {}));
  }
  DirListings::Scope next(listings);
  EXPECT_TRUE(next.check(dir + "/inc", {"h.h"}, {}));
  EXPECT_FALSE(next.check(dir + "/inc/bits/types", {"h.h"}, {}));
  EXPECT_FALSE(next.check(dir + "/nope/deeper", {"h.h"}, {}));
  EXPECT_FALSE(next.check(dir + "/nope/deeper/", {"h.h"}, {}));
}

}  // namespace
}  // namespace ccpool::compiler::testing
