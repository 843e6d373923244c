// Issue 4's correctness suite at library level, with real g++ and clang++:
// every hit is byte-identical to a direct compile, and every change a direct
// compile would see produces a miss.
#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "tests/compiler/real_compiler_case.h"

namespace ccpool::compiler::testing {
namespace {

class CcCorrectness : public RealCompilerCase {};

TEST_P(CcCorrectness, HeaderContentChangedMisses) {
  write_text(dir + "/inc/h.h", "#define V 1\n");
  write_text(dir + "/k.cpp", "#include \"h.h\"\nint f() { return V; }\n");
  auto r = request({"-c", "k.cpp", "-I", "inc", "-O2", "-o", "k.o"});
  Outcome first = check(r, "k.o", "ref.o");
  EXPECT_EQ(first.plan.kind, PlanKind::kCompiler) << first.plan.reason;
  EXPECT_TRUE(first.stored) << first.why_not;
  EXPECT_TRUE(check(r, "k.o", "ref.o").hit);
  write_text(dir + "/inc/h.h", "#define V 2\n");
  Outcome changed = check(r, "k.o", "ref.o");
  EXPECT_FALSE(changed.hit);
  EXPECT_TRUE(check(r, "k.o", "ref.o").hit);
  EXPECT_EQ(store.executions, 2);
}

TEST_P(CcCorrectness, HeaderDeletedMisses) {
  write_text(dir + "/inc1/h.h", "#define V 1\n");
  write_text(dir + "/inc2/h.h", "#define V 2\n");
  write_text(dir + "/k.cpp", "#include <h.h>\nint f() { return V; }\n");
  auto r = request({"-c", "k.cpp", "-Iinc1", "-Iinc2", "-o", "k.o"});
  EXPECT_TRUE(check(r, "k.o", "ref.o").stored);
  std::filesystem::remove(dir + "/inc1/h.h");
  EXPECT_FALSE(check(r, "k.o", "ref.o").hit);
}

TEST_P(CcCorrectness, NewHeaderShadowingInEarlierDirMisses) {
  write_text(dir + "/inc2/h.h", "#define V 2\n");
  std::filesystem::create_directories(dir + "/inc1");
  write_text(dir + "/k.cpp", "#include <h.h>\nint f() { return V; }\n");
  auto r = request({"-c", "k.cpp", "-I", "inc1", "-I", "inc2", "-o", "k.o"});
  EXPECT_TRUE(check(r, "k.o", "ref.o").stored);
  EXPECT_TRUE(check(r, "k.o", "ref.o").hit);
  write_text(dir + "/inc1/h.h", "#define V 1\n");  // shadows inc2/h.h
  EXPECT_FALSE(check(r, "k.o", "ref.o").hit);
}

TEST_P(CcCorrectness, QuoteIncludeShadowedBySourceDirMisses) {
  write_text(dir + "/inc/h.h", "#define V 2\n");
  write_text(dir + "/src/k.cpp", "#include \"h.h\"\nint f() { return V; }\n");
  auto r = request({"-c", "src/k.cpp", "-Iinc", "-o", "k.o"});
  EXPECT_TRUE(check(r, "k.o", "ref.o").stored);
  write_text(dir + "/src/h.h", "#define V 1\n");  // the includer's dir comes first
  EXPECT_FALSE(check(r, "k.o", "ref.o").hit);
}

TEST_P(CcCorrectness, IncludeDirectoryAppearingMisses) {
  write_text(dir + "/inc/h.h", "#define V 2\n");
  write_text(dir + "/k.cpp", "#include <h.h>\nint f() { return V; }\n");
  auto r = request({"-c", "k.cpp", "-Ilater", "-Iinc", "-o", "k.o"});
  EXPECT_TRUE(check(r, "k.o", "ref.o").stored);
  write_text(dir + "/later/h.h", "#define V 1\n");
  EXPECT_FALSE(check(r, "k.o", "ref.o").hit);
}

TEST_P(CcCorrectness, QuoteIncludeOfAHeaderShadowedByItsDirMisses) {
  // The includer is a header: its directory comes first for its own "b.h".
  write_text(dir + "/inc/a.h", "#include \"b.h\"\n");
  write_text(dir + "/inc2/b.h", "#define V 2\n");
  write_text(dir + "/k.cpp", "#include <a.h>\nint f() { return V; }\n");
  auto r = request({"-c", "k.cpp", "-Iinc", "-Iinc2", "-o", "k.o"});
  EXPECT_TRUE(check(r, "k.o", "ref.o").stored);
  EXPECT_TRUE(check(r, "k.o", "ref.o").hit);
  write_text(dir + "/inc/b.h", "#define V 1\n");
  EXPECT_FALSE(check(r, "k.o", "ref.o").hit);
}

TEST_P(CcCorrectness, AngleIncludeIgnoresTheIncludersDir) {
  // <h.h> never looks in the including file's directory, so a file of that
  // name appearing there changes nothing and must not cost a miss.
  write_text(dir + "/inc/h.h", "#define V 2\n");
  write_text(dir + "/src/k.cpp", "#include <h.h>\nint f() { return V; }\n");
  auto r = request({"-c", "src/k.cpp", "-Iinc", "-o", "k.o"});
  EXPECT_TRUE(check(r, "k.o", "ref.o").stored);
  write_text(dir + "/src/h.h", "#define V 1\n");
  EXPECT_TRUE(check(r, "k.o", "ref.o").hit);
  EXPECT_EQ(store.executions, 1);
  std::string manifest = store.manifests.begin()->second;
  EXPECT_EQ(manifest.find("src/h.h"), std::string::npos) << manifest;
}

TEST_P(CcCorrectness, MacroIncludeIsResolvedAsTheCompilerDid) {
  write_text(dir + "/inc/h.h", "#define V 2\n");
  write_text(dir + "/src/k.cpp", "#define HDR <h.h>\n#include HDR\nint f() { return V; }\n");
  auto r = request({"-c", "src/k.cpp", "-Iinc", "-o", "k.o"});
  EXPECT_TRUE(check(r, "k.o", "ref.o").stored);
  // HDR is an angle include: the includer's directory is never searched, and
  // the record (not a scan of the text) says so.
  write_text(dir + "/src/h.h", "#define V 1\n");
  EXPECT_TRUE(check(r, "k.o", "ref.o").hit);
  EXPECT_EQ(store.executions, 1);
}

TEST_P(CcCorrectness, ForcedIncludeShadowedInCwdMisses) {
  write_text(dir + "/inc/fi.h", "#define V 2\n");
  write_text(dir + "/src/k.cpp", "int f() { return V; }\n");
  auto r = request({"-c", "src/k.cpp", "-Iinc", "-include", "fi.h", "-o", "k.o"});
  EXPECT_TRUE(check(r, "k.o", "ref.o").stored);
  write_text(dir + "/fi.h", "#define V 1\n");  // -include searches the cwd first
  EXPECT_FALSE(check(r, "k.o", "ref.o").hit);
}

TEST_P(CcCorrectness, NewHeaderAfterMemoizedListingMisses) {
  write_text(dir + "/inc2/h.h", "#define V 2\n");
  write_text(dir + "/inc1/other.h", "\n");
  write_text(dir + "/k.cpp", "#include <h.h>\nint f() { return V; }\n");
  ::sleep(3);  // age inc1 past the racy window: its listing gets memoized
  auto r = request({"-c", "k.cpp", "-Iinc1", "-Iinc2", "-o", "k.o"});
  EXPECT_TRUE(check(r, "k.o", "ref.o").stored);
  EXPECT_TRUE(check(r, "k.o", "ref.o").hit);
  uint64_t reads = planner.counters().directory_reads;
  EXPECT_TRUE(check(r, "k.o", "ref.o").hit);
  // inc1 comes from the memo; only the cwd, which each check writes k.o
  // into (changed within the racy window), may be read again.
  EXPECT_LE(planner.counters().directory_reads, reads + 1);
  write_text(dir + "/inc1/h.h", "#define V 1\n");  // shadows inc2/h.h
  EXPECT_FALSE(check(r, "k.o", "ref.o").hit);
}

TEST_P(CcCorrectness, ManifestIsParsedOncePerBytes) {
  write_text(dir + "/inc/h.h", "#define V 1\n");
  write_text(dir + "/k.cpp", "#include \"h.h\"\nint f() { return V; }\n");
  auto r = request({"-c", "k.cpp", "-Iinc", "-o", "k.o"});
  uint64_t before = planner.counters().manifest_parses;
  EXPECT_TRUE(execute(planner, store, r).stored);
  EXPECT_EQ(planner.counters().manifest_parses, before + 1);  // by the miss that wrote it
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(execute(planner, store, r).hit);
  EXPECT_EQ(planner.counters().manifest_parses, before + 1);  // no hit parses it again
  write_text(dir + "/inc/h.h", "#define V 2\n");
  EXPECT_TRUE(execute(planner, store, r).stored);  // new bytes: a second entry
  EXPECT_TRUE(execute(planner, store, r).hit);
  EXPECT_TRUE(execute(planner, store, r).hit);
  EXPECT_EQ(planner.counters().manifest_parses,
            before + 2);  // the new bytes, once (the miss's lookup reused the old parse)
}

// The service's planner: the validation memo on, lessons deferred.
PlannerOptions deferring(size_t max_lessons = PlannerOptions{}.max_lessons) {
  PlannerOptions options;
  options.validation_memo = true;
  options.defer_lessons = true;
  options.max_lessons = max_lessons;
  return options;
}

// PlannerOptions::defer_lessons (the service's setting): a stored miss
// leaves its lesson (its manifest parsed for the first hit, its record kept
// in the validation memo) pending until the caller asks; the first hit after
// it is served from the memo without parsing, and an edit after the lesson
// is still a miss with the direct compile's bytes.
TEST_P(CcCorrectness, AMissesLessonIsLearnedWhenAskedAndServesTheFirstHit) {
  Planner deferred(deferring());
  ASSERT_TRUE(deferred.has_validation_memo()) << "inotify is unavailable";
  write_text(dir + "/inc/h.h", "#define V 1\n");
  write_text(dir + "/k.cpp", "#include \"h.h\"\nint f() { return V; }\n");
  auto r = request({"-c", "k.cpp", "-Iinc", "-o", "k.o"});
  ASSERT_TRUE(execute(deferred, store, r).stored);
  EXPECT_EQ(deferred.pending_lessons(), 1u);
  EXPECT_EQ(deferred.counters().memo_learned, 0u);
  uint64_t parses = deferred.counters().manifest_parses;
  EXPECT_EQ(deferred.learn_lessons(store.storage(), [] { return false; }), 0u);
  EXPECT_EQ(deferred.pending_lessons(), 1u);
  EXPECT_EQ(deferred.learn_lessons(store.storage(), [] { return true; }), 1u);
  EXPECT_EQ(deferred.pending_lessons(), 0u);
  EXPECT_EQ(deferred.counters().lessons_learned, 1u);
  EXPECT_GT(deferred.counters().memo_learned, 0u);
  EXPECT_EQ(deferred.counters().manifest_parses, parses + 1);

  uint64_t served = deferred.counters().memo_served;
  EXPECT_TRUE(execute(deferred, store, r).hit);
  EXPECT_GT(deferred.counters().memo_served, served);
  EXPECT_EQ(deferred.counters().manifest_parses, parses + 1);  // the lesson's parse

  write_text(dir + "/inc/h.h", "#define V 2\n");
  Outcome edited = execute(deferred, store, r);
  EXPECT_FALSE(edited.hit);
  EXPECT_TRUE(edited.stored) << edited.why_not;
  std::string got = read_text(dir + "/k.o");
  std::vector<std::string> direct = r.argv;
  direct[0] = r.program;
  direct.back() = "ref.o";
  ASSERT_EQ(run_direct(direct, r.cwd, r.env), 0);
  EXPECT_TRUE(got == read_text(dir + "/ref.o")) << "the edited header's object differs";

  // A lesson whose manifest is gone by then teaches nothing.
  EXPECT_EQ(deferred.pending_lessons(), 1u);
  uint64_t learned_before = deferred.counters().memo_learned;
  EXPECT_EQ(deferred.learn_lessons(ManifestStorage{}, [] { return true; }), 1u);
  EXPECT_EQ(deferred.counters().memo_learned, learned_before);
  EXPECT_EQ(deferred.counters().lessons_learned, 1u);
  EXPECT_EQ(deferred.counters().lessons_unlearned, 1u);
}

// PlannerOptions::max_lessons: past it the oldest lesson is dropped, and
// the newest are learned.
TEST_P(CcCorrectness, LessonsPastTheBoundDropTheOldest) {
  Planner deferred(deferring(2));
  for (int i = 0; i < 3; ++i) {
    std::string name = "k" + std::to_string(i) + ".cpp";
    write_text(dir + "/" + name, "int f" + std::to_string(i) + "() { return 1; }\n");
    ASSERT_TRUE(execute(deferred, store, request({"-c", name, "-o", "k.o"})).stored) << name;
  }
  EXPECT_EQ(deferred.pending_lessons(), 2u);
  EXPECT_EQ(deferred.counters().lessons_dropped, 1u);
  EXPECT_EQ(deferred.learn_lessons(store.storage(), [] { return true; }), 2u);
  EXPECT_EQ(deferred.counters().lessons_learned, 2u);
  EXPECT_EQ(deferred.pending_lessons(), 0u);
  // The two newest were parsed by their lessons; the oldest's first hit parses it.
  uint64_t parses = deferred.counters().manifest_parses;
  for (int i : {2, 1, 0}) {
    std::string name = "k" + std::to_string(i) + ".cpp";
    EXPECT_TRUE(execute(deferred, store, request({"-c", name, "-o", "k.o"})).hit) << name;
    EXPECT_EQ(deferred.counters().manifest_parses, parses + (i == 0 ? 1 : 0)) << name;
  }
}

// A lesson reads its manifest back from the store: an entry there whose
// result key does not match its contents (a hit skips it) teaches nothing.
TEST_P(CcCorrectness, ALessonWhoseStoredEntryDoesNotMatchItsKeyTeachesNothing) {
  Planner deferred(deferring());
  ASSERT_TRUE(deferred.has_validation_memo()) << "inotify is unavailable";
  write_text(dir + "/inc/h.h", "#define V 1\n");
  write_text(dir + "/k.cpp", "#include \"h.h\"\nint f() { return V; }\n");
  auto r = request({"-c", "k.cpp", "-Iinc", "-o", "k.o"});
  Outcome miss = execute(deferred, store, r);
  ASSERT_TRUE(miss.stored);
  ASSERT_EQ(store.manifests.size(), 1u);
  std::string& blob = store.manifests.begin()->second;
  std::string key = miss.conclusion.finished.result_key.hex();
  size_t at = blob.find(key);
  ASSERT_NE(at, std::string::npos);
  blob.replace(at, key.size(), hash_bytes("another result").hex());
  EXPECT_EQ(deferred.learn_lessons(store.storage(), [] { return true; }), 1u);
  EXPECT_EQ(deferred.counters().memo_learned, 0u);
  // Taken, and counted as teaching nothing, not as learned.
  EXPECT_EQ(deferred.counters().lessons_learned, 0u);
  EXPECT_EQ(deferred.counters().lessons_unlearned, 1u);
  EXPECT_FALSE(execute(deferred, store, r).hit);  // and no hit takes it either
}

// A hit whose manifest is parsed in memory does not read it again (the store
// decompresses and checksums it on every read); new bytes are read once.
TEST_P(CcCorrectness, AManifestParsedInMemoryIsNotReadAgain) {
  write_text(dir + "/inc/h.h", "#define V 1\n");
  write_text(dir + "/k.cpp", "#include \"h.h\"\nint f() { return V; }\n");
  auto r = request({"-c", "k.cpp", "-Iinc", "-o", "k.o"});
  EXPECT_TRUE(check(r, "k.o", "ref.o").stored);
  EXPECT_TRUE(check(r, "k.o", "ref.o").hit);
  size_t loads = store.manifest_loads;
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(check(r, "k.o", "ref.o").hit);
  EXPECT_EQ(store.manifest_loads, loads);
  write_text(dir + "/inc/h.h", "#define V 2\n");
  EXPECT_TRUE(check(r, "k.o", "ref.o").stored);  // the manifest gains an entry: new bytes
  EXPECT_TRUE(check(r, "k.o", "ref.o").hit);
  loads = store.manifest_loads;
  EXPECT_TRUE(check(r, "k.o", "ref.o").hit);
  EXPECT_EQ(store.manifest_loads, loads);
  write_text(dir + "/inc/h.h", "#define V 1\n");  // back to the first entry's bytes
  EXPECT_TRUE(check(r, "k.o", "ref.o").hit);
}

TEST_P(CcCorrectness, DefineAndOptimisationChangeTheKey) {
  write_text(dir + "/k.cpp", "int f() { return V * 3; }\n");
  Outcome a = check(request({"-c", "k.cpp", "-DV=1", "-O1", "-o", "k.o"}), "k.o", "ref.o");
  Outcome b = check(request({"-c", "k.cpp", "-DV=2", "-O1", "-o", "k.o"}), "k.o", "ref.o");
  Outcome c = check(request({"-c", "k.cpp", "-DV=2", "-O2", "-o", "k.o"}), "k.o", "ref.o");
  EXPECT_FALSE(b.hit);
  EXPECT_FALSE(c.hit);
  EXPECT_NE(a.plan.flight_key, b.plan.flight_key);
  EXPECT_NE(b.plan.flight_key, c.plan.flight_key);
}

TEST_P(CcCorrectness, CpathChangesTheKey) {
  write_text(dir + "/a/h.h", "#define V 1\n");
  write_text(dir + "/b/h.h", "#define V 2\n");
  write_text(dir + "/k.cpp", "#include <h.h>\nint f() { return V; }\n");
  auto r = request({"-c", "k.cpp", "-o", "k.o"});
  r.env.push_back("CPATH=" + dir + "/a");
  EXPECT_TRUE(check(r, "k.o", "ref.o").stored);
  r.env.back() = "CPATH=" + dir + "/b";
  EXPECT_FALSE(check(r, "k.o", "ref.o").hit);
}

TEST_P(CcCorrectness, SameSourceInTwoDirsWithDifferentHeaders) {
  for (const char* d : {"a", "b"}) {
    write_text(dir + "/" + d + "/k.cpp", "#include \"h.h\"\nint f() { return V; }\n");
  }
  write_text(dir + "/a/h.h", "#define V 1\n");
  write_text(dir + "/b/h.h", "#define V 2\n");
  auto ra = request({"-c", "k.cpp", "-o", "k.o"}, dir + "/a");
  auto rb = request({"-c", "k.cpp", "-o", "k.o"}, dir + "/b");
  EXPECT_TRUE(check(ra, "k.o", "ref.o").stored);
  EXPECT_FALSE(check(rb, "k.o", "ref.o").hit);
  EXPECT_TRUE(check(ra, "k.o", "ref.o").hit);
  EXPECT_TRUE(check(rb, "k.o", "ref.o").hit);
}

// Both compilers make __DATE__/__TIME__ from localtime() on their first
// expansion (and nothing else calls it): the record shows it, and such a
// compile is stored only when SOURCE_DATE_EPOCH pins it (gcc: gmtime).
TEST_P(CcCorrectness, DateAndTimeAreStoredOnlyWhenPinned) {
  write_text(dir + "/d.cpp", "const char* d() { return __DATE__; }\n");
  auto rd = request({"-c", "d.cpp", "-o", "d.o"});
  Outcome od = execute(planner, store, rd);
  EXPECT_FALSE(od.stored);
  EXPECT_EQ(od.why_not_code, "time_macro") << od.why_not;
  write_text(dir + "/t.cpp", "const char* t() { return __TIME__; }\n");
  auto rt = request({"-c", "t.cpp", "-o", "t.o"});
  Outcome o = execute(planner, store, rt);
  EXPECT_FALSE(o.stored);
  EXPECT_EQ(o.why_not_code, "time_macro") << o.why_not;
  rt.env.push_back("SOURCE_DATE_EPOCH=1700000000");
  if (GetParam().find("clang") != std::string::npos) {
    // clang 14 ignores SOURCE_DATE_EPOCH: __TIME__ is never pinned, never stored.
    EXPECT_FALSE(execute(planner, store, rt).stored);
    return;
  }
  EXPECT_TRUE(check(rt, "t.o", "ref.o").stored);
  EXPECT_TRUE(check(rt, "t.o", "ref.o").hit);
}

// A __TIME__ built by token pasting is not in the text: direct mode must not
// store it (a hit a second later would replay another time).
TEST_P(CcCorrectness, PastedTimeMacroIsNotStored) {
  write_text(dir + "/cat.h", "#define CAT(a, b) a##b\n");
  write_text(dir + "/p.cpp", "#include \"cat.h\"\nconst char* t() { return CAT(__TI, ME__); }\n");
  auto r = request({"-c", "p.cpp", "-o", "p.o"});
  for (int i = 0; i < 2; ++i) {
    Outcome o = execute(planner, store, r);
    EXPECT_FALSE(o.stored) << o.why_not;
    EXPECT_FALSE(o.hit);
    EXPECT_EQ(o.why_not_code, "time_macro") << o.why_not;
  }
  // Pasting that cannot form those names stays cacheable.
  write_text(dir + "/q.cpp", "#include \"cat.h\"\nint CAT(fo, o)() { return 1; }\n");
  auto q = request({"-c", "q.cpp", "-o", "q.o"});
  EXPECT_TRUE(execute(planner, store, q).stored);
  EXPECT_TRUE(execute(planner, store, q).hit);
}

TEST_P(CcCorrectness, DebugInfoKeysCwdUnlessPrefixMapped) {
  for (const char* d : {"a", "b"}) write_text(dir + "/" + d + "/k.cpp", "int f() { return 7; }\n");
  auto ra = request({"-c", "-g", "k.cpp", "-o", "k.o"}, dir + "/a");
  auto rb = request({"-c", "-g", "k.cpp", "-o", "k.o"}, dir + "/b");
  EXPECT_TRUE(check(ra, "k.o", "ref.o").stored);
  EXPECT_FALSE(check(rb, "k.o", "ref.o").hit);
  auto ma = request({"-c", "-g", "-fdebug-prefix-map=" + dir + "/a=/src", "k.cpp", "-o", "k.o"},
                    dir + "/a");
  auto mb = request({"-c", "-g", "-fdebug-prefix-map=" + dir + "/b=/src", "k.cpp", "-o", "k.o"},
                    dir + "/b");
  // The map's text differs, so the keys differ too; the same map text from
  // two cwds it does not cover must not share.
  EXPECT_TRUE(check(ma, "k.o", "ref.o").stored);
  EXPECT_FALSE(check(mb, "k.o", "ref.o").hit);
  auto pa = request({"-c", "-g", "-fdebug-prefix-map=" + dir + "=/src", "k.cpp", "-o", "k.o"},
                    dir + "/a");
  auto pb = request({"-c", "-g", "-fdebug-prefix-map=" + dir + "=/src", "k.cpp", "-o", "k.o"},
                    dir + "/b");
  Outcome oa = check(pa, "k.o", "ref.o");
  Outcome ob = check(pb, "k.o", "ref.o");
  EXPECT_NE(oa.plan.flight_key, ob.plan.flight_key);  // /src/a vs /src/b
}

// Without -g the cwd still reaches the object: -fprofile-arcs embeds the absolute .gcda
// path (gcc and clang alike). Such compiles in two directories must not share, and each
// must match a direct compile in its own directory byte for byte.
TEST_P(CcCorrectness, CwdReachesTheObjectWithoutDebugInfo) {
  for (const char* d : {"a", "b"})
    write_text(dir + "/" + d + "/k.cpp", "int f(int x) { return x * 3; }\n");
  // gcc stamps coverage data from a random seed unless it is given one.
  std::vector<std::string> args = {"-c", "-fprofile-arcs", "-frandom-seed=7", "k.cpp", "-o", "k.o"};
  auto ra = request(args, dir + "/a");
  auto rb = request(args, dir + "/b");
  Outcome oa = execute(planner, store, ra);
  ASSERT_EQ(oa.plan.kind, PlanKind::kCompiler) << oa.plan.reason;
  EXPECT_TRUE(oa.stored) << oa.why_not;
  std::string built_in_a = read_text(dir + "/a/k.o");
  EXPECT_NE(built_in_a.find(dir + "/a/k.gcda"), std::string::npos)
      << "the object no longer names its .gcda path";
  Outcome ob = execute(planner, store, rb);
  EXPECT_FALSE(ob.hit) << "a compile in " << dir << "/b was served the object built in " << dir
                       << "/a";
  EXPECT_NE(oa.plan.flight_key, ob.plan.flight_key);
  std::string served = read_text(dir + "/b/k.o");
  EXPECT_EQ(served.find(dir + "/a/"), std::string::npos) << "the object in b names a's directory";
  std::vector<std::string> direct = rb.argv;
  direct[0] = rb.program;
  ASSERT_EQ(run_direct(direct, rb.cwd, rb.env), 0);
  EXPECT_TRUE(served == read_text(dir + "/b/k.o"))
      << "bytes differ from a direct compile in " << rb.cwd;
  EXPECT_TRUE(execute(planner, store, rb).hit);
  EXPECT_TRUE(read_text(dir + "/b/k.o") == served);
}

// docs/cache-keys.md: a compile that runs in place (its -o is not redirected) keys its
// cwd, -g or not; a plain redirected -c does not, so two checkouts share it.
TEST_P(CcCorrectness, CommandsThatAreNotRedirectedKeyTheirCwd) {
  for (const char* d : {"a", "b"}) write_text(dir + "/" + d + "/k.cpp", "int f() { return 7; }\n");
  auto plan_in = [&](const char* sub, const std::vector<std::string>& flags) {
    std::vector<std::string> args = {"-c", "k.cpp", "-o", "k.o"};
    args.insert(args.begin() + 1, flags.begin(), flags.end());
    auto plan = planner.plan(request(args, dir + "/" + sub), dir + "/work");
    EXPECT_TRUE(plan) << plan.error().message;
    EXPECT_EQ(plan->kind, PlanKind::kCompiler) << plan->reason;
    return *plan;
  };
  Plan plain = plan_in("a", {"-O2"});
  EXPECT_NE(plain.outputs[0].run_path, plain.outputs[0].deliver_path) << "plain -c is redirected";
  EXPECT_EQ(plain.flight_key, plan_in("b", {"-O2"}).flight_key);
  std::vector<std::vector<std::string>> in_place = {
      {"-fstack-usage"},
      {"-ftest-coverage"},
      {"-fprofile-arcs"},
      {"--coverage"},
      {"-flto"},
      {"-frecord-gcc-switches"},
      {"-g", "-gsplit-dwarf", "-ffile-prefix-map=" + dir + "=/src"}};
  for (const auto& flags : in_place) {
    SCOPED_TRACE(flags.back());
    Plan a = plan_in("a", flags);
    EXPECT_EQ(a.outputs[0].run_path, a.outputs[0].deliver_path) << "expected an in-place run";
    EXPECT_NE(a.flight_key, plan_in("b", flags).flight_key);
  }
}

TEST_P(CcCorrectness, CompilerSwappedBehindSymlinkChangesKey) {
  write_text(dir + "/k.cpp", "int f() { return 7; }\n");
  std::filesystem::create_directories(dir + "/bin");
  std::string link = dir + "/bin/c++";
  std::string other = GetParam() == "g++" ? "/usr/bin/clang++" : "/usr/bin/g++";
  std::filesystem::create_symlink(compiler(), link);
  Request r = request({"-c", "k.cpp", "-o", "k.o"});
  r.program = link;
  r.argv[0] = link;
  Outcome first = execute(planner, store, r);
  EXPECT_TRUE(first.stored) << first.plan.reason << first.why_not;
  std::filesystem::remove(link);
  std::filesystem::create_symlink(other, link);
  Outcome second = execute(planner, store, r);
  EXPECT_FALSE(second.hit);
  EXPECT_NE(first.plan.flight_key, second.plan.flight_key);
}

TEST_P(CcCorrectness, MarchNativeIsResolvedAndKeyed) {
  write_text(
      dir + "/k.cpp",
      "float f(float* a) { float s = 0; for (int i = 0; i < 64; ++i) s += a[i]; return s; }\n");
  Outcome native =
      check(request({"-c", "-O3", "-march=native", "k.cpp", "-o", "k.o"}), "k.o", "ref.o");
  EXPECT_EQ(native.plan.kind, PlanKind::kCompiler) << native.plan.reason;
  EXPECT_TRUE(
      check(request({"-c", "-O3", "-march=native", "k.cpp", "-o", "k.o"}), "k.o", "ref.o").hit);
  Outcome generic =
      check(request({"-c", "-O3", "-march=x86-64", "k.cpp", "-o", "k.o"}), "k.o", "ref.o");
  EXPECT_NE(native.plan.flight_key, generic.plan.flight_key);
}

// A one-step link's key covers the libraries its -l options find: their
// bytes, a linker script's targets, and which search directory wins.
class LinkInputs : public CcCorrectness {
 protected:
  void library(const std::string& path, int value) {
    write_text(dir + "/lib_src.cpp", "int q() { return " + std::to_string(value) + "; }\n");
    ASSERT_EQ(
        run_direct({compiler(), "-shared", "-fPIC", "lib_src.cpp", "-o", path}, dir, base_env()),
        0);
  }
  Request link(const std::vector<std::string>& search) {
    write_text(dir + "/k.cpp", "int q();\nint k() { return q(); }\n");
    std::vector<std::string> args = {"k.cpp", "-O2", "-shared", "-fPIC"};
    args.insert(args.end(), search.begin(), search.end());
    args.insert(args.end(), {"-lq", "-o", "k.so"});
    return request(args);
  }
};

TEST_P(LinkInputs, ChangedLibraryMisses) {
  ::mkdir((dir + "/lib").c_str(), 0755);
  library("lib/libq.so", 1);
  Request r = link({"-Llib"});
  ASSERT_TRUE(check(r, "k.so", "ref.so").stored);
  EXPECT_TRUE(check(r, "k.so", "ref.so").hit);
  library("lib/libq.so", 22);
  EXPECT_FALSE(check(r, "k.so", "ref.so").hit);
}

TEST_P(LinkInputs, ChangedLinkerScriptTargetMisses) {
  ::mkdir((dir + "/lib").c_str(), 0755);
  library("lib/libq_real.so", 1);
  write_text(dir + "/lib/libq.so", "/* GNU ld script */\nGROUP ( " + dir + "/lib/libq_real.so )\n");
  Request r = link({"-Llib"});
  ASSERT_TRUE(check(r, "k.so", "ref.so").stored);
  EXPECT_TRUE(check(r, "k.so", "ref.so").hit);
  library("lib/libq_real.so", 22);
  EXPECT_FALSE(check(r, "k.so", "ref.so").hit);
}

TEST_P(LinkInputs, LibraryAppearingEarlierInTheSearchMisses) {
  ::mkdir((dir + "/lib1").c_str(), 0755);
  ::mkdir((dir + "/lib2").c_str(), 0755);
  library("lib2/libq.so", 1);
  Request r = link({"-Llib1", "-Llib2"});
  ASSERT_TRUE(check(r, "k.so", "ref.so").stored);
  EXPECT_TRUE(check(r, "k.so", "ref.so").hit);
  library("lib1/libq.so", 22);
  EXPECT_FALSE(check(r, "k.so", "ref.so").hit);
}

INSTANTIATE_TEST_SUITE_P(Compilers, LinkInputs, ::testing::Values("g++", "clang++"),
                         [](const auto& info) {
                           return info.param == "g++" ? std::string("gcc") : std::string("clang");
                         });

TEST_P(CcCorrectness, OneStepSharedObjectSharedAcrossOutputPaths) {
  write_text(dir + "/k.cpp", "extern \"C\" int kernel(int x) { return x * 6 + 1; }\n");
  auto r1 = request({"k.cpp", "-O2", "-shared", "-fPIC", "-o", "k1.so", "-lm"});
  Outcome first = check(r1, "k1.so", "ref1.so");
  ASSERT_EQ(first.plan.kind, PlanKind::kCompiler) << first.plan.reason;
  EXPECT_TRUE(first.stored) << first.why_not;
  auto r2 = request({"k.cpp", "-O2", "-shared", "-fPIC", "-o", "k2.so", "-lm"});
  Outcome second = check(r2, "k2.so", "ref2.so");
  EXPECT_TRUE(second.hit);
  EXPECT_EQ(first.plan.flight_key, second.plan.flight_key);
  EXPECT_EQ(store.executions, 1);
  void* handle = ::dlopen((dir + "/k2.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << ::dlerror();
  auto fn = reinterpret_cast<int (*)(int)>(::dlsym(handle, "kernel"));
  ASSERT_NE(fn, nullptr);
  EXPECT_EQ(fn(7), 43);
  ::dlclose(handle);
}

TEST_P(CcCorrectness, WarningsAreReplayed) {
  write_text(dir + "/k.cpp", "int f() { int unused = 3; return 1; }\n");
  auto r = request({"-c", "-Wall", "k.cpp", "-o", "k.o"});
  Outcome first = execute(planner, store, r);
  EXPECT_NE(first.stderr_text.find("unused"), std::string::npos);
  Outcome second = execute(planner, store, r);
  EXPECT_TRUE(second.hit);
  EXPECT_EQ(first.stderr_text, second.stderr_text);
}

TEST_P(CcCorrectness, DependencyFilesMatchDirectCompile) {
  write_text(dir + "/inc/h.h", "#define V 1\n");
  write_text(dir + "/k.cpp", "#include \"h.h\"\nint f() { return V; }\n");
  struct Case {
    std::vector<std::string> args;
    std::string dep;
  };
  std::vector<Case> cases = {
      {{"-c", "k.cpp", "-Iinc", "-MD", "-MF", "k.d", "-o", "k.o"}, "k.d"},
      {{"-c", "k.cpp", "-Iinc", "-MD", "-o", "obj/k.o"}, "obj/k.d"},
      {{"-c", "k.cpp", "-Iinc", "-MD", "-MP", "-MT", "custom", "-MF", "k.d", "-o", "k.o"}, "k.d"},
      {{"-c", "k.cpp", "-Iinc", "-MD", "-MQ", "a$b", "-MF", "k.d", "-o", "k.o"}, "k.d"},
  };
  std::filesystem::create_directories(dir + "/obj");
  for (const Case& c : cases) {
    Outcome o = execute(planner, store, request(c.args));
    ASSERT_EQ(o.plan.kind, PlanKind::kCompiler) << o.plan.reason;
    EXPECT_TRUE(o.stored) << o.why_not;
    std::string cached = read_text(dir + "/" + c.dep);
    Outcome hit = execute(planner, store, request(c.args));
    EXPECT_TRUE(hit.hit);
    EXPECT_EQ(read_text(dir + "/" + c.dep), cached);
    std::filesystem::remove(dir + "/" + c.dep);
    std::vector<std::string> direct = {compiler()};
    direct.insert(direct.end(), c.args.begin(), c.args.end());
    ASSERT_EQ(run_direct(direct, dir, base_env()), 0);
    EXPECT_EQ(read_text(dir + "/" + c.dep), cached) << "for " << c.dep;
  }
}

// Issue 13 item 2: every dependency-flag combination that make, CMake
// (Makefile and Ninja generators) and autotools' depcomp use, byte-compared
// with the compiler's own file, on the miss and on the hit. Long paths make
// both compilers wrap lines; system headers (defaults and -isystem) are what
// -MMD drops.
TEST_P(CcCorrectness, DependencyFlagTableMatchesDirectCompile) {
  std::string lng(40, 'x');
  write_text(dir + "/inc/" + lng + "/a.h", "#include <cstddef>\n#define V 1\n");
  write_text(dir + "/sys/s.h", "#include <cstdint>\n#define W 2\n");
  write_text(dir + "/sp ace/h#1.h", "#define Y 3\n");
  write_text(dir + "/k.cpp", "#include \"inc/" + lng +
                                 "/a.h\"\n#include <s.h>\n#include \"sp ace/h#1.h\"\n"
                                 "#include <vector>\nint f() { return V + W + Y; }\n");
  std::filesystem::create_directories(dir + "/obj");
  struct Case {
    std::vector<std::string> args;
    std::string dep;                    // the file the compiler writes
    std::vector<std::string> env = {};  // extra environment
  };
  const std::vector<std::string> base = {"-c", "k.cpp", "-isystem", "sys"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> args = base;
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  std::vector<Case> cases = {
      {with({"-MMD", "-o", "k.o"}), "k.d"},                 // make auto-deps
      {with({"-MMD", "-MP", "-o", "obj/k.o"}), "obj/k.d"},  // make auto-deps + phony
      {with({"-MMD"}), "k.d"},                              // no -o: k.d, target k.o
      {with({"-MMD", "-MF", "deps/k.dep", "-o", "k.o"}), "deps/k.dep"},
      {with({"-MMD", "-MT", "obj/k.o", "-MF", "obj/k.o.d", "-o", "obj/k.o"}), "obj/k.o.d"},
      {with({"-MMD", "-MP", "-MT", "a$b", "-MQ", "c$d", "-MF", "k.d", "-o", "k.o"}), "k.d"},
      {with({"-MD", "-MT", "obj/k.o", "-MF", "obj/k.o.d", "-o", "obj/k.o"}),
       "obj/k.o.d"},  // CMake Ninja/Makefiles
      {with({"-MT", "obj/k.o", "-MD", "-MP", "-MF", "obj/k.Tpo", "-o", "obj/k.o"}),
       "obj/k.Tpo"},  // depcomp gcc3
      {with({"-MD", "-MP", "-o", "k.o"}), "k.d"},
      {with({"-MD", "-MMD", "-o", "k.o"}), "k.d"},  // the last one wins
  };
  if (GetParam() == "g++") {  // clang has no environment form
    cases.push_back({with({"-o", "k.o"}), "env.d", {"DEPENDENCIES_OUTPUT=env.d"}});
    cases.push_back({with({"-o", "obj/k.o"}), "env.d", {"DEPENDENCIES_OUTPUT=env.d obj/k.o"}});
    cases.push_back({with({"-o", "k.o"}), "sun.d", {"SUNPRO_DEPENDENCIES=sun.d"}});
  }
  std::filesystem::create_directories(dir + "/deps");
  for (const Case& c : cases) {
    std::string what = c.dep + " from";
    for (const auto& arg : c.args) what += " " + arg;
    std::vector<std::string> env = base_env();
    env.insert(env.end(), c.env.begin(), c.env.end());
    std::vector<std::string> direct = {compiler()};
    direct.insert(direct.end(), c.args.begin(), c.args.end());
    std::filesystem::remove(dir + "/" + c.dep);
    ASSERT_EQ(run_direct(direct, dir, env), 0) << what;
    std::string want = read_text(dir + "/" + c.dep);
    ASSERT_FALSE(want.empty()) << what;
    if (!c.env.empty()) {  // appended: the service must append once, like the compiler
      std::string twice = want + want;
      ASSERT_EQ(run_direct(direct, dir, env), 0) << what;
      ASSERT_EQ(read_text(dir + "/" + c.dep), twice) << what;
    }
    for (int round = 0; round < 2; ++round) {
      std::filesystem::remove(dir + "/" + c.dep);
      Request r = request(c.args);
      r.env = env;
      Outcome o = execute(planner, store, r);
      ASSERT_EQ(o.plan.kind, PlanKind::kCompiler) << what << ": " << o.plan.reason;
      EXPECT_EQ(o.hit, round == 1) << what;
      if (round == 0) {
        EXPECT_TRUE(o.stored) << what << ": " << o.why_not;
      }
      EXPECT_EQ(read_text(dir + "/" + c.dep), want) << what << (round ? " (hit)" : " (miss)");
    }
  }
  // -MMD must not hide a system header from the manifest: changing one misses.
  Request r = request(with({"-MMD", "-o", "k.o"}));
  EXPECT_TRUE(execute(planner, store, r).hit);
  write_text(dir + "/sys/s.h", "#include <cstdint>\n#define W 5\n");
  EXPECT_FALSE(execute(planner, store, r).hit);
}

// The assembler's `.include` reads a file that no dependency file lists:
// an object assembled from it must not be stored (a changed included file
// would be a false hit), whether the directive sits in inline asm or in a .S.
// The assembler's .include reads a file no .d lists; the record sees the
// assembler open it, however the directive was spelled.
TEST_P(CcCorrectness, AssemblerIncludeIsRecorded) {
  write_text(dir + "/v.s", ".globl v\n.data\nv: .long 1\n");
  write_text(dir + "/i.cpp", "asm(\".include \\\"v.s\\\"\");\nint f() { return 2; }\n");
  auto r = request({"-c", "i.cpp", "-o", "i.o"});
  Outcome o = check(r, "i.o", "ref.o");
  EXPECT_TRUE(o.stored) << o.why_not;
  EXPECT_TRUE(check(r, "i.o", "ref.o").hit);
  write_text(dir + "/v.s", ".globl v\n.data\nv: .long 7\n");
  o = check(r, "i.o", "ref.o");
  EXPECT_FALSE(o.hit) << "a changed .include file was served from the store";
  EXPECT_EQ(store.executions, 2);
}

// Assembly with C preprocessing (`.S`, `-x assembler-with-cpp`; zstd's
// huf_decompress_amd64.S) is cached like C: its #includes are in the .d.
TEST_P(CcCorrectness, PreprocessedAssemblyIsCachedAndHeaderChangeMisses) {
  write_text(dir + "/asm/val.h", "#define VAL 5\n");
  write_text(dir + "/a.S", "#include \"asm/val.h\"\n.globl a_val\n.data\na_val: .long VAL\n");
  auto r = request({"-c", "-Wa,--noexecstack", "-MMD", "-MP", "-MF", "a.d", "-o", "a.o", "a.S"});
  Outcome o = check(r, "a.o", "ref.o");
  ASSERT_EQ(o.plan.kind, PlanKind::kCompiler) << o.plan.reason;
  EXPECT_TRUE(o.stored) << o.why_not;
  EXPECT_TRUE(check(r, "a.o", "ref.o").hit);
  write_text(dir + "/asm/val.h", "#define VAL 6\n");
  o = check(r, "a.o", "ref.o");
  EXPECT_FALSE(o.hit);
  EXPECT_TRUE(o.stored) << o.why_not;
  auto x = request({"-x", "assembler-with-cpp", "-c", "a.S", "-o", "x.o"});
  EXPECT_EQ(execute(planner, store, x).plan.kind, PlanKind::kCompiler);
  // Plain assembly (`.s`) has no preprocessor to list its inputs: pass-through.
  write_text(dir + "/p.s", ".globl p\n.data\np: .long 1\n");
  EXPECT_EQ(execute(planner, store, request({"-c", "p.s", "-o", "p.o"})).plan.kind,
            PlanKind::kPassthrough);
  write_text(dir + "/q.S", ".include \"p.s\"\n");
  auto rq = request({"-c", "q.S", "-o", "q.o"});
  EXPECT_TRUE(check(rq, "q.o", "refq.o").stored);
  write_text(dir + "/p.s", ".globl p\n.data\np: .long 2\n");
  EXPECT_FALSE(check(rq, "q.o", "refq.o").hit);
}

// zstd's Makefile compiles `.//common/xxhash.c`; gcc's .d names it
// `common/xxhash.c` (leading "./" dropped). Such a source is still cached,
// and the dependency file stays the compiler's own.
TEST_P(CcCorrectness, SourceSpelledWithLeadingDotSlashIsStored) {
  write_text(dir + "/sub/h.h", "#define V 4\n");
  write_text(dir + "/sub/k.cpp", "#include \"h.h\"\nint f() { return V; }\n");
  for (std::string src : {"./sub/k.cpp", ".//sub/k.cpp", "././sub/k.cpp", ".//.//sub/./k.cpp"}) {
    std::vector<std::string> args = {"-c",  "-MT", "k.o", "-MMD", "-MP",
                                     "-MF", "k.d", "-o",  "k.o",  src};
    std::vector<std::string> direct = {compiler()};
    direct.insert(direct.end(), args.begin(), args.end());
    std::filesystem::remove(dir + "/k.d");
    ASSERT_EQ(run_direct(direct, dir, base_env()), 0) << src;
    std::string want = read_text(dir + "/k.d");
    ASSERT_FALSE(want.empty()) << src;
    for (int round = 0; round < 2; ++round) {
      std::filesystem::remove(dir + "/k.d");
      Outcome o = execute(planner, store, request(args));
      ASSERT_EQ(o.plan.kind, PlanKind::kCompiler) << src << ": " << o.plan.reason;
      EXPECT_EQ(o.hit, round == 1) << src;
      if (round == 0) {
        EXPECT_TRUE(o.stored) << src << ": " << o.why_not;
      }
      EXPECT_EQ(read_text(dir + "/k.d"), want) << src;
    }
  }
}

TEST_P(CcCorrectness, ResponseFileIsExpanded) {
  write_text(dir + "/k.cpp", "int f() { return V; }\n");
  write_text(dir + "/args.rsp", "-c \"-DV=4\"\n-O2\n");
  Outcome a = check(request({"@args.rsp", "k.cpp", "-o", "k.o"}), "k.o", "ref.o");
  EXPECT_EQ(a.plan.kind, PlanKind::kCompiler) << a.plan.reason;
  Outcome b = execute(planner, store, request({"-c", "-DV=4", "-O2", "k.cpp", "-o", "k.o"}));
  EXPECT_EQ(a.plan.flight_key, b.plan.flight_key);
  EXPECT_TRUE(b.hit);
  write_text(dir + "/args.rsp", "-c -DV=5 -O2\n");
  EXPECT_FALSE(check(request({"@args.rsp", "k.cpp", "-o", "k.o"}), "k.o", "ref.o").hit);
}

TEST_P(CcCorrectness, StdinAndUnknownOptionsPassThrough) {
  write_text(dir + "/k.c", "int f(void) { return 1; }\n");
  Outcome in = execute(planner, store, request({"-x", "c", "-c", "-", "-o", "k.o"}));
  EXPECT_EQ(in.plan.kind, PlanKind::kPassthrough);
  EXPECT_NE(in.plan.reason.find("stdin"), std::string::npos);
  EXPECT_EQ(in.plan.reason_code, "stdin_input");
  Outcome unknown = execute(planner, store, request({"-c", "k.c", "--frobnicate", "-o", "k.o"}));
  EXPECT_EQ(unknown.plan.kind, PlanKind::kPassthrough);
  EXPECT_NE(unknown.plan.reason.find("--frobnicate"), std::string::npos);
  EXPECT_EQ(unknown.plan.reason_code, "unknown_option:--frobnicate");
  EXPECT_EQ(store.results.size(), 0u);
}

TEST_P(CcCorrectness, EditsDuringTheCompileAreNotStored) {
  write_text(dir + "/inc/h.h", "#define V 1\n");
  write_text(dir + "/k.cpp", "#include \"h.h\"\nint f() { return V; }\n");
  auto r = request({"-c", "k.cpp", "-Iinc", "-o", "k.o"});
  Outcome src =
      execute(planner, store, r, [&] { write_text(dir + "/k.cpp", "int f() { return 9; }\n"); });
  EXPECT_FALSE(src.stored);
  EXPECT_FALSE(src.why_not.empty());
  write_text(dir + "/k.cpp", "#include \"h.h\"\nint f() { return V; }\n");
  sleep(0);
  Outcome hdr = execute(planner, store, r, [&] { write_text(dir + "/inc/h.h", "#define V 1\n"); });
  EXPECT_FALSE(hdr.stored);
  EXPECT_NE(hdr.why_not.find("modified during"), std::string::npos) << hdr.why_not;
  EXPECT_EQ(src.why_not_code, "input_changed_during_compile");
  EXPECT_EQ(hdr.why_not_code, "input_changed_during_compile");
  EXPECT_EQ(store.results.size(), 0u);
}

// A header that shadows the one the compile found (it appears, during the
// run, in a search directory searched first) leaves the run unstored: the run
// saw it absent, the next would see it. The directory's listing is memoized
// by the first run (the directory is older than the memo's racy window), so a
// stale listing would miss the new name.
TEST_P(CcCorrectness, AHeaderAppearingInAnEarlierSearchDirDuringTheCompileIsNotStored) {
  write_text(dir + "/b/h.h", "#define V 1\n");
  std::filesystem::create_directories(dir + "/a");
  write_text(dir + "/k.cpp", "#include \"h.h\"\nint f() { return V; }\n");
  struct timespec old[2] = {{::time(nullptr) - 60, 0}, {::time(nullptr) - 60, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, (dir + "/a").c_str(), old, 0), 0);
  Outcome first = execute(planner, store, request({"-c", "k.cpp", "-Ia", "-Ib", "-o", "k.o"}));
  ASSERT_TRUE(first.stored) << first.why_not;
  size_t stored = store.results.size();
  Outcome second =
      execute(planner, store, request({"-c", "k.cpp", "-DW=2", "-Ia", "-Ib", "-o", "k.o"}),
              [&] { write_text(dir + "/a/h.h", "#define V 2\n"); });
  EXPECT_FALSE(second.hit);
  EXPECT_FALSE(second.stored);
  EXPECT_EQ(second.why_not_code, "input_changed_during_compile") << second.why_not;
  EXPECT_NE(second.why_not.find("/a/h.h' appeared during the run"), std::string::npos)
      << second.why_not;
  EXPECT_EQ(store.results.size(), stored);
}

INSTANTIATE_TEST_SUITE_P(Compilers, CcCorrectness, ::testing::Values("g++", "clang++"),
                         [](const auto& info) {
                           return info.param == "g++" ? std::string("gcc") : std::string("clang");
                         });

}  // namespace
}  // namespace ccpool::compiler::testing
