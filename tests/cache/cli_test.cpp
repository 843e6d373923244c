// Runs the real `ccpool cache ...` binary: every subcommand, --json parsing,
// exit codes (0/1/2), export/import between two stores and the bad-input list.
#include <gtest/gtest.h>
#include <pty.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/fs.h"
#include "tests/cache/crafted.h"
#include "tests/cache/store_fixture.h"

namespace ccpool::cache {
namespace {

using nlohmann::json;

struct CliRun {
  int code;
  std::string out, err;
};

// `env` is a prefix such as "CCPOOL_FAULT=fail_store_write=0".
CliRun ccpool(const std::string& args, const std::string& env = "") {
  const std::string& dir = ccpool::testing::scratch_dir();
  std::string cmd = "env -u CCPOOL_DIR -u CCPOOL_FAULT " + env + " " +
                    ccpool::testing::build_binary("ccpool") + " " + args + " >" + dir + "/out 2>" +
                    dir + "/err";
  int status = std::system(cmd.c_str());
  CliRun r{WIFEXITED(status) ? WEXITSTATUS(status) : -1, *read_file(dir + "/out"),
           *read_file(dir + "/err")};
  return r;
}

// Runs `ccpool ARGS` with stdout and stderr on a fresh pseudo-terminal; returns what the
// terminal received (the line discipline turns "\n" into "\r\n") as `out`.
CliRun ccpool_on_tty(const std::string& args) {
  std::string cmd =
      "exec env -u CCPOOL_DIR " + ccpool::testing::build_binary("ccpool") + " " + args;
  int master = -1;
  pid_t pid = ::forkpty(&master, nullptr, nullptr, nullptr);
  if (pid < 0) return CliRun{-1, "", std::string("forkpty: ") + std::strerror(errno)};
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  std::string seen;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(master, buf, sizeof buf);
    if (n > 0) {
      seen.append(buf, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;  // EIO once the child side is closed
    }
  }
  ::close(master);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return CliRun{WIFEXITED(status) ? WEXITSTATUS(status) : -1, seen, ""};
}

json parse(const CliRun& r) {
  EXPECT_EQ(r.code, 0) << r.err;
  return json::parse(r.out);  // throws (fails the test) on invalid JSON
}

std::string dir_of(const std::string& name) {
  return ccpool::testing::scratch_dir() + "/" + name;
}

// Fills a store with `n` entries of distinct sizes; returns their keys.
std::vector<Digest> fill(const std::string& dir, int n) {
  StoreOptions o = testing::options();
  o.dir = dir;
  auto store = testing::open_store(o);
  std::vector<Digest> keys;
  for (int i = 0; i < n; ++i) {
    Entry e = testing::make_entry("out.o", 1000 * (i + 1), i);
    e.label = "label-" + std::to_string(i);
    EXPECT_TRUE(store->put(testing::test_key(i), e));
    keys.push_back(testing::test_key(i));
  }
  return keys;
}

// Peak RSS in kB of the largest process `ccpool args` ran (the CLI itself):
// measured in a forked child, so no earlier test's children count.
long ccpool_peak_rss_kb(const std::string& args) {
  int fds[2];
  if (::pipe(fds) != 0) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    ccpool(args);
    rusage usage{};
    ::getrusage(RUSAGE_CHILDREN, &usage);
    long kb = usage.ru_maxrss;
    (void)!::write(fds[1], &kb, sizeof kb);
    ::_exit(0);
  }
  ::close(fds[1]);
  long kb = -1;
  if (::read(fds[0], &kb, sizeof kb) != sizeof kb) kb = -1;
  ::close(fds[0]);
  ::waitpid(pid, nullptr, 0);
  return kb;
}

// The case: a few hundred bytes of archive whose body claims 512 MiB
// (main zero-filled it) and an entry length beyond the end of the file.
TEST(CacheCliTest, ImportOfACraftedArchiveCostsLittleMemory) {
  std::string dir = dir_of("crafted");
  std::string lying = dir_of("lying.ccpool");
  std::string longer = dir_of("longer.ccpool");
  std::ofstream(lying, std::ios::binary) << testing::archive_of(
      {{testing::test_key(1), testing::packed_declaring(std::string(100000, 'a'), 512ull << 20)}});
  std::ofstream(longer, std::ios::binary)
      << testing::archive_of({{testing::test_key(1), std::string(40, 'p'), 600ull << 20}}, false);
  for (const std::string& archive : {lying, longer}) {
    long kb = ccpool_peak_rss_kb("cache import " + archive + " --dir " + dir);
    ASSERT_GT(kb, 0);
    EXPECT_LT(kb, 64 * 1024) << archive;
    CliRun r = ccpool("cache import " + archive + " --dir " + dir);
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find(archive), std::string::npos) << r.err;
  }
}

TEST(CacheCliTest, StatsJsonOnAnEmptyDirectory) {
  std::string dir = dir_of("empty");
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  json j = parse(ccpool("cache stats --json --dir " + dir));
  EXPECT_EQ(j["entries"], 0);
  EXPECT_EQ(j["stored_bytes"], 0);
  for (const char* key :
       {"dir", "logical_bytes", "compression_ratio", "hits", "misses", "time_saved_ms", "oldest_ms",
        "newest_ms", "map_size", "map_used", "max_size", "schema_version"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  CliRun human = ccpool("cache stats --dir " + dir);
  EXPECT_EQ(human.code, 0);
  EXPECT_NE(human.out.find("max size        10.0 GiB"), std::string::npos) << human.out;
  EXPECT_EQ(ccpool("cache --help").code, 0);
  EXPECT_EQ(ccpool("cache ls --help").code, 0);
}

TEST(CacheCliTest, StatsJsonCountsSharedBodiesOnce) {
  std::string dir = dir_of("s");
  {
    StoreOptions o = testing::options();
    o.dir = dir;
    auto store = testing::open_store(o);
    ASSERT_TRUE(store->put(testing::test_key(1), testing::make_entry("a.o", 3000, 5)));
    ASSERT_TRUE(store->put(testing::test_key(2),
                           testing::make_entry("b.o", 3000, 5)));  // same bytes as a.o
    ASSERT_TRUE(store->put(testing::test_key(3), testing::make_entry("c.o", 3000, 6)));
  }
  json j = parse(ccpool("cache stats --json --dir " + dir));
  EXPECT_EQ(j["entries"], 3);
  EXPECT_EQ(j["bodies"], 2);
  EXPECT_EQ(j["logical_bytes"], 9000);
  EXPECT_EQ(j["evictions"], 0);
  EXPECT_EQ(j["corrupt_evictions"], 0);
}

TEST(CacheCliTest, LsShowCatRm) {
  std::string dir = dir_of("s");
  auto keys = fill(dir, 3);
  json ls = parse(ccpool("cache ls --json --dir " + dir));
  ASSERT_EQ(ls.size(), 3u);
  json biggest = parse(ccpool("cache ls --json --sort size --limit 1 --dir " + dir));
  ASSERT_EQ(biggest.size(), 1u);
  EXPECT_EQ(biggest[0]["key"], keys[2].hex());
  EXPECT_EQ(biggest[0]["logical_bytes"], 3000);
  EXPECT_NE(ccpool("cache ls --dir " + dir).out.find("label-1"), std::string::npos);

  std::string prefix = keys[1].hex().substr(0, 10);
  json show = parse(ccpool("cache show --json " + prefix + " --dir " + dir));
  EXPECT_EQ(show["key"], keys[1].hex());
  EXPECT_EQ(show["label"], "label-1");
  EXPECT_EQ(show["outputs"][0]["size"], 2000);
  EXPECT_EQ(show["outputs"][0]["checksum"], hash_bytes(testing::random_bytes(2000, 1)).hex());
  EXPECT_EQ(show["argv"][1], "-c");
  CliRun human = ccpool("cache show " + keys[1].hex() + " --dir " + dir);
  EXPECT_NE(human.out.find("out.o"), std::string::npos);

  std::string file = dir_of("extracted.o");
  EXPECT_EQ(ccpool("cache cat " + prefix + " out.o -o " + file + " --dir " + dir).code, 0);
  EXPECT_EQ(*read_file(file), testing::random_bytes(2000, 1));
  EXPECT_EQ(ccpool("cache cat " + prefix + " out.o --dir " + dir).out,
            testing::random_bytes(2000, 1));
  CliRun wrong = ccpool("cache cat " + prefix + " nope.o --dir " + dir);
  EXPECT_EQ(wrong.code, 1);
  EXPECT_NE(wrong.err.find("out.o"), std::string::npos);  // lists what exists

  json rm =
      parse(ccpool("cache rm --json " + keys[0].hex() + " " + keys[2].hex() + " --dir " + dir));
  EXPECT_EQ(rm["removed"].size(), 2u);
  EXPECT_EQ(parse(ccpool("cache stats --json --dir " + dir))["entries"], 1);
  EXPECT_EQ(ccpool("cache rm " + keys[0].hex() + " --dir " + dir).code, 1);  // gone already
}

// A crafted entry asks for setuid/setgid/sticky: cat -o writes what a compile
// would create instead (0777 for executables, under the caller's umask).
TEST(CacheCliTest, CatNeverWritesSpecialModeBits) {
  std::string dir = dir_of("s");
  {
    StoreOptions o = testing::options();
    o.dir = dir;
    auto store = testing::open_store(o);
    Entry e = testing::make_entry("tool", 100);
    e.outputs[0].mode = 07777;
    ASSERT_TRUE(store->put(testing::test_key(1), e));
  }
  std::string file = dir_of("tool");
  CliRun r =
      ccpool("cache cat " + testing::test_key(1).hex() + " tool -o " + file + " --dir " + dir,
             "sh -c 'umask 027; exec \"$0\" \"$@\"'");
  ASSERT_EQ(r.code, 0) << r.err;
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0750u);
}

TEST(CacheCliTest, AmbiguousPrefixListsCandidates) {
  std::string dir = dir_of("s");
  auto keys = fill(dir, 40);
  std::string prefix;
  for (size_t i = 0; i < keys.size() && prefix.empty(); ++i) {
    for (size_t j = i + 1; j < keys.size(); ++j) {
      if (keys[i].hex()[0] == keys[j].hex()[0]) prefix = keys[i].hex().substr(0, 1);
    }
  }
  ASSERT_FALSE(prefix.empty());
  CliRun r = ccpool("cache show " + prefix + " --dir " + dir);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("ambiguous"), std::string::npos);
  EXPECT_NE(r.err.find("\n  " + prefix), std::string::npos) << r.err;
}

TEST(CacheCliTest, UsageErrorsExitTwo) {
  std::string dir = dir_of("s");
  fill(dir, 1);
  CliRun bad_key = ccpool("cache show not-a-key --dir " + dir);
  EXPECT_EQ(bad_key.code, 2);
  EXPECT_NE(bad_key.err.find("malformed key 'not-a-key'"), std::string::npos) << bad_key.err;
  EXPECT_EQ(std::count(bad_key.err.begin(), bad_key.err.end(), '\n'), 1);  // one line
  EXPECT_EQ(ccpool("cache show " + std::string(40, 'a') + " --dir " + dir).code, 2);
  CliRun bad_size = ccpool("cache gc --max-size 10Q --dir " + dir);
  EXPECT_EQ(bad_size.code, 2);
  EXPECT_NE(bad_size.err.find("10Q"), std::string::npos);
  EXPECT_EQ(ccpool("cache gc --older-than soon --dir " + dir).code, 2);
  EXPECT_EQ(ccpool("cache frobnicate").code, 2);
  EXPECT_EQ(ccpool("cache ls --sort color --dir " + dir).code, 2);
  EXPECT_EQ(parse(ccpool("cache stats --json --dir " + dir))["entries"], 1);  // nothing lost
}

TEST(CacheCliTest, MissingCorruptAndForeignStoresExitOne) {
  CliRun missing = ccpool("cache ls --dir " + dir_of("absent"));
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.err.find(dir_of("absent")), std::string::npos);
  // Except `stats`, which reports a store not created yet as an empty one (issue 15).
  CliRun empty = ccpool("cache stats --dir " + dir_of("absent"));
  EXPECT_EQ(empty.code, 0) << empty.err;
  EXPECT_NE(empty.out.find("does not exist yet"), std::string::npos) << empty.out;
  std::string corrupt = dir_of("corrupt");
  ASSERT_TRUE(ensure_private_dir(corrupt));
  ASSERT_TRUE(write_file_atomic(corrupt + "/data.mdb", std::string(16384, 'z'), 0600));
  CliRun bad = ccpool("cache ls --dir " + corrupt);
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("corrupt"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find(corrupt), std::string::npos);
  // A directory that is not ours (root runs tests too: ownership, not mode bits).
  std::string foreign = dir_of("foreign");
  ASSERT_EQ(::mkdir(foreign.c_str(), 0700), 0);
  ASSERT_EQ(::chown(foreign.c_str(), ::geteuid() == 0 ? 65534 : 0, static_cast<gid_t>(-1)) == 0 ||
                ::geteuid() != 0,
            true);
  if (::geteuid() == 0) {
    CliRun denied = ccpool("cache stats --dir " + foreign);
    EXPECT_EQ(denied.code, 1);
    EXPECT_NE(denied.err.find("owned by uid 65534"), std::string::npos) << denied.err;
  }
  std::string locked = dir_of("locked");
  ASSERT_EQ(::mkdir(locked.c_str(), 0500), 0);
  if (::geteuid() != 0) {
    CliRun denied = ccpool("cache stats --dir " + locked);
    EXPECT_EQ(denied.code, 1);
    EXPECT_NE(denied.err.find(locked), std::string::npos) << denied.err;
  }
}

TEST(CacheCliTest, ClearGcAndVerify) {
  std::string dir = dir_of("s");
  auto keys = fill(dir, 6);
  {
    StoreOptions o = testing::options();
    o.dir = dir;
    auto store = testing::open_store(o);
    ASSERT_TRUE(store->corrupt_body_for_testing(keys[4], 0));
  }
  json before = parse(ccpool("cache stats --json --dir " + dir));
  EXPECT_EQ(before["bodies"], 6);
  EXPECT_EQ(before["evictions"], 0);
  EXPECT_EQ(before["corrupt_evictions"], 0);
  CliRun found = ccpool("cache verify --dir " + dir);
  EXPECT_EQ(found.code, 1);
  EXPECT_NE(found.out.find("corrupt " + keys[4].hex()), std::string::npos) << found.out;
  EXPECT_NE(found.err.find("verify --fix"), std::string::npos);
  json fixed = parse(ccpool("cache verify --fix --json --dir " + dir));
  EXPECT_EQ(fixed["corrupt"].size(), 1u);
  EXPECT_EQ(fixed["corrupt"][0]["key"], keys[4].hex());
  EXPECT_EQ(fixed["removed"], 1);
  EXPECT_EQ(parse(ccpool("cache verify --json --dir " + dir))["corrupt"].size(), 0u);
  json after_fix = parse(ccpool("cache stats --json --dir " + dir));
  EXPECT_EQ(after_fix["entries"], 5);
  EXPECT_EQ(after_fix["bodies"], 5);
  EXPECT_EQ(after_fix["corrupt_evictions"], 1);
  EXPECT_EQ(after_fix["evictions"], 0);  // a corrupt entry is not an LRU eviction

  json none = parse(ccpool("cache gc --older-than 1h --json --dir " + dir));
  EXPECT_EQ(none["removed_entries"], 0);
  json gc = parse(ccpool("cache gc --max-size 8K --json --dir " + dir));
  EXPECT_GE(gc["removed_entries"], 3);
  json after_gc = parse(ccpool("cache stats --json --dir " + dir));
  EXPECT_LE(after_gc["stored_bytes"], 8192);
  EXPECT_EQ(after_gc["evictions"], gc["removed_entries"]);
  EXPECT_EQ(after_gc["entries"].get<int>(), 5 - gc["removed_entries"].get<int>());
  EXPECT_EQ(after_gc["bodies"], after_gc["entries"]);  // every entry has its own body
  EXPECT_EQ(after_gc["corrupt_evictions"], 1);
  json cleared = parse(ccpool("cache clear --json --dir " + dir));
  EXPECT_GE(cleared["removed"], 1);
  EXPECT_EQ(parse(ccpool("cache stats --json --dir " + dir))["entries"], 0);
}

TEST(CacheCliTest, ExportImportBetweenTwoStores) {
  std::string a = dir_of("a"), b = dir_of("b"), archive = dir_of("seed.ccpool");
  auto keys = fill(a, 5);
  json exp = parse(ccpool("cache export " + archive + " --json --dir " + a));
  EXPECT_EQ(exp["entries"], 5);
  json imp = parse(ccpool("cache import " + archive + " --json --dir " + b));
  EXPECT_EQ(imp["entries"], 5);
  EXPECT_EQ(imp["skipped"], 0);
  std::string file = dir_of("x.o");
  EXPECT_EQ(ccpool("cache cat " + keys[3].hex() + " out.o -o " + file + " --dir " + b).code, 0);
  EXPECT_EQ(*read_file(file), testing::random_bytes(4000, 3));
  json again = parse(ccpool("cache import " + archive + " --json --dir " + b));
  EXPECT_EQ(again["entries"], 0);
  EXPECT_EQ(again["skipped"], 5);
}

// Issue 23: export wrote its temporary file at the predictable FILE.tmp with
// fopen("wb"), following a symlink another user planted there (into a file
// of the exporting user's choosing) or clobbering what was there. It must be
// created the way write_file_atomic does: a fresh name, O_EXCL, O_NOFOLLOW.
TEST(CacheCliTest, ExportFollowsNoPlantedTemporaryFile) {
  std::string a = dir_of("a"), archive = dir_of("out.ccpool"), victim = dir_of("victim");
  fill(a, 3);
  ASSERT_TRUE(write_file_atomic(victim, "the victim's bytes\n", 0644));
  ASSERT_EQ(::symlink(victim.c_str(), (archive + ".tmp").c_str()), 0);
  CliRun exported = ccpool("cache export " + archive + " --json --dir " + a);
  ASSERT_EQ(exported.code, 0) << exported.err;
  EXPECT_EQ(parse(exported)["entries"], 3);
  EXPECT_EQ(*read_file(victim), "the victim's bytes\n");
  struct stat st {};
  ASSERT_EQ(::lstat((archive + ".tmp").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode)) << "the planted link was replaced";
  ASSERT_EQ(::lstat(archive.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 077, 0u) << "an archive of the store is private";
  std::string b = dir_of("b");
  EXPECT_EQ(parse(ccpool("cache import " + archive + " --json --dir " + b))["entries"], 3);
}

// docs/cli.md: verify, gc, export and import draw a progress bar on stderr when it is a TTY,
// and only then.
TEST(CacheCliTest, ProgressBarsOnATerminalOnly) {
  std::string a = dir_of("a"), b = dir_of("b"), archive = dir_of("seed.ccpool");
  fill(a, 5);
  CliRun verify = ccpool_on_tty("cache verify --dir " + a);
  EXPECT_EQ(verify.code, 0) << verify.out;
  EXPECT_NE(verify.out.find("\rverify [" + std::string(30, '#') + "] 100% 5/5"), std::string::npos)
      << verify.out;
  EXPECT_NE(
      verify.out.find("\rverify [" + std::string(6, '#') + std::string(24, ' ') + "]  20% 1/5"),
      std::string::npos)
      << verify.out;
  EXPECT_NE(verify.out.find("checked 5 entries"), std::string::npos) << verify.out;
  CliRun exported = ccpool_on_tty("cache export " + archive + " --dir " + a);
  EXPECT_EQ(exported.code, 0) << exported.out;
  EXPECT_NE(exported.out.find("\rexport "), std::string::npos) << exported.out;
  CliRun imported = ccpool_on_tty("cache import " + archive + " --dir " + b);
  EXPECT_EQ(imported.code, 0) << imported.out;
  EXPECT_NE(imported.out.find("\rimport "), std::string::npos) << imported.out;
  CliRun gc = ccpool_on_tty("cache gc --max-size 4K --dir " + b);
  EXPECT_EQ(gc.code, 0) << gc.out;
  EXPECT_NE(gc.out.find("\rgc "), std::string::npos) << gc.out;

  for (const std::string& args :
       {"cache verify --dir " + a, "cache export " + archive + " --dir " + a,
        "cache gc --max-size 4K --dir " + a}) {
    CliRun piped = ccpool(args);
    EXPECT_EQ(piped.code, 0) << args << ": " << piped.err;
    EXPECT_EQ(piped.err, "") << args;
    EXPECT_EQ(piped.out.find('\r'), std::string::npos) << args;
  }
}

TEST(CacheCliTest, BadArchivesAreRejectedWithoutImportingAnything) {
  std::string a = dir_of("a"), c = dir_of("c"), archive = dir_of("seed.ccpool");
  fill(a, 5);
  ASSERT_EQ(ccpool("cache export " + archive + " --dir " + a).code, 0);
  std::string good = *read_file(archive);
  ASSERT_EQ(::mkdir(c.c_str(), 0700), 0);
  auto try_import = [&](const std::string& bytes, const std::string& env = "") {
    std::string path = dir_of("bad.ccpool");
    EXPECT_TRUE(write_file_atomic(path, bytes, 0600));
    CliRun r = ccpool("cache import " + path + " --dir " + c, env);
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(parse(ccpool("cache stats --json --dir " + c))["entries"],
              0);  // nothing half-imported
    return r.err;
  };
  std::string damaged = good;
  damaged[good.size() - 40] ^= 0x20;  // inside the last entry
  EXPECT_NE(try_import(damaged).find("bad.ccpool"), std::string::npos);
  EXPECT_NE(try_import(good.substr(0, good.size() * 2 / 3)).find("truncated"), std::string::npos);
  EXPECT_NE(try_import("just some text file\n").find("not a ccpool archive"), std::string::npos);
  std::string newer = good;
  newer[8] = 99;  // archive format version
  EXPECT_NE(try_import(newer).find("newer"), std::string::npos);
  std::string full = try_import(good, "CCPOOL_FAULT=fail_store_write=0");
  EXPECT_NE(full.find("CCPOOL_FAULT"), std::string::npos) << full;
}

}  // namespace
}  // namespace ccpool::cache
