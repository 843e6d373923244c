// ar and ranlib command lines (compiler/ar_args.h), and the archive check
// that keeps a dated archive out of the store.
#include "compiler/ar_args.h"

#include <gtest/gtest.h>

namespace ccpool::compiler {
namespace {

TEST(ArArgs, TheSpellingsOfMakeSystemsAreAccepted) {
  for (std::vector<std::string> argv : std::vector<std::vector<std::string>>{
           {"ar", "qc", "lib.a", "a.o", "b.o"},  // CMake
           {"ar", "cr", "lib.a", "a.o"},         // libtool
           {"ar", "rcs", "lib.a", "a.o"},        // Makefiles
           {"ar", "-rcsD", "lib.a", "a.o"},      // leading dash, explicit D
           {"ar", "qcS", "lib.a"},               // no member, no index
           {"ar", "rcv", "lib.a", "a.o"},        // verbose
       }) {
    ArArgs a = parse_ar_args(argv);
    EXPECT_EQ(a.refused, "") << argv[1];
    EXPECT_EQ(a.archive_index, 2u);
    EXPECT_TRUE(a.create_quietly);
  }
  EXPECT_FALSE(parse_ar_args({"ar", "q", "lib.a", "a.o"}).create_quietly);
  EXPECT_EQ(parse_ranlib_args({"ranlib", "lib.a"}).archive_index, 1u);
  EXPECT_EQ(parse_ranlib_args({"ranlib", "-D", "lib.a"}).archive_index, 2u);
}

TEST(ArArgs, EverythingElseIsRefusedWithItsCode) {
  struct Case {
    std::vector<std::string> argv;
    std::string code;
  };
  for (const Case& c : std::vector<Case>{
           {{"ar", "qc"}, "ar_operation"},
           {{"ar", "t", "lib.a"}, "ar_operation:t"},
           {{"ar", "d", "lib.a", "a.o"}, "ar_operation:d"},
           {{"ar", "s", "lib.a"}, "ar_operation"},  // act as ranlib: no q or r
           {{"ar", "qr", "lib.a", "a.o"}, "ar_operation"},
           {{"ar", "rcU", "lib.a", "a.o"}, "ar_modifier:U"},
           {{"ar", "rcT", "lib.a", "a.o"}, "ar_modifier:T"},
           {{"ar", "rcu", "lib.a", "a.o"}, "ar_modifier:u"},
           {{"ar", "rcb", "a.o", "lib.a", "b.o"}, "ar_modifier:b"},
           {{"ar", "rcP", "lib.a", "a.o"}, "ar_modifier:P"},
           {{"ar", "rcV", "lib.a", "a.o"}, "ar_modifier:V"},
           {{"ar", "--plugin", "p.so", "rc", "lib.a"}, "ar_option:--plugin"},
           {{"ar", "@opts", "lib.a"}, "ar_option:@opts"},
           {{"ar", "rc", "lib.a", "--target=x", "a.o"}, "ar_option:--target=x"},
           {{"ar", "rc", "lib.a", "a.o", "lib.a"}, "ar_archive_is_member"},
           {{"ranlib"}, "ranlib_arguments"},
           {{"ranlib", "-U", "lib.a"}, "ranlib_arguments"},
           {{"ranlib", "a.a", "b.a"}, "ranlib_arguments"},
           {{"ranlib", "@list"}, "ranlib_arguments"},
       }) {
    ArArgs a = c.argv[0] == "ranlib" ? parse_ranlib_args(c.argv) : parse_ar_args(c.argv);
    EXPECT_EQ(a.refused_code, c.code) << c.argv.size() << " args, " << a.refused;
    EXPECT_NE(a.refused, "");
  }
}

std::string header(const std::string& name, const std::string& date, const std::string& uid,
                   const std::string& gid, size_t size, const std::string& mode = "644") {
  auto pad = [](std::string s, size_t n) { return s.append(n - s.size(), ' '); };
  return pad(name, 16) + pad(date, 12) + pad(uid, 6) + pad(gid, 6) + pad(mode, 8) +
         pad(std::to_string(size), 10) + "`\n";
}

TEST(ArchiveCheck, ZeroDatesAndIdsPassAnythingElseDoesNot) {
  // As GNU ar's D mode writes them (od of a real archive): the symbol table,
  // the long-name table, a member named through it and one named inline.
  std::string good = "!<arch>\n" + header("/", "0", "0", "0", 4, "0") + "abcd" +
                     header("//", "", "", "", 2, "") + "x\n" + header("/0", "0", "0", "0", 1) +
                     "y\n" + header("a.o/", "0", "0", "0", 3) + "xyz\n";
  EXPECT_EQ(archive_not_deterministic(good), "");
  // ar U: the file's own mode (and its dates, here 0 as a file could have).
  EXPECT_NE(archive_not_deterministic("!<arch>\n" + header("a.o/", "0", "0", "0", 0, "100644")),
            "");
  EXPECT_NE(archive_not_deterministic("!<arch>\n" + header("a.o/", "0", "0", "0", 0, "755")), "");
  EXPECT_NE(archive_not_deterministic("!<arch>\n" + header("//", "0", "", "", 0, "")), "");
  EXPECT_EQ(archive_not_deterministic("!<arch>\n"), "");  // empty archive
  std::string dated = "!<arch>\n" + header("a.o/", "1700000000", "0", "0", 2) + "xy";
  EXPECT_NE(archive_not_deterministic(dated).find("a.o/"), std::string::npos);
  EXPECT_NE(archive_not_deterministic("!<arch>\n" + header("a.o/", "0", "1000", "0", 0)), "");
  EXPECT_NE(archive_not_deterministic("!<arch>\n" + header("a.o/", "0", "0", "100", 0)), "");
  // The second member is dated: the first one's odd size must be padded over.
  std::string second =
      "!<arch>\n" + header("a.o/", "0", "0", "0", 1) + "x\n" + header("b.o/", "5", "0", "0", 0);
  EXPECT_NE(archive_not_deterministic(second).find("b.o/"), std::string::npos);
  EXPECT_NE(archive_not_deterministic("!<thin>\n"), "");
  EXPECT_NE(archive_not_deterministic("!<arch>\n" + header("a.o/", "0", "0", "0", 9) + "x"), "");
  EXPECT_NE(archive_not_deterministic("!<arch>\nshort"), "");
  std::string bad_size = header("a.o/", "0", "0", "0", 0);
  bad_size.replace(48, 3, "1x2");
  EXPECT_NE(archive_not_deterministic("!<arch>\n" + bad_size), "");
}

}  // namespace
}  // namespace ccpool::compiler
