"""Compiler correctness through the real service (issue 4), with real g++/gcc
and clang++/clang. The library-level suite (tests/compiler/) covers key
material case by case; this one checks what a user of `ccpool exec` (the
shim's client) sees: bytes, modes, diagnostics, exit codes and counters.

Every comparison is against the same command run directly in the same cwd.
Concurrency is made deterministic with a gate job holding the only slot
(jobs=1): the requests provably queue behind it before it is released.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
from e2e_case import PYTHON, E2ECase, main  # noqa: E402
from harness import CCPOOL  # noqa: E402

N = 8

HEADER = """#pragma once
static inline int helper(int x) { int unused_in_header; return x * 3; }
"""

# Warns in the header and in the source; returns a constant from the header.
WARN_SRC = """#include "inc/h.h"
int warned(int x) { int unused_in_source; return helper(x) + VALUE; }
extern "C" int kernel_id() { return 7; }
"""

ERROR_SRC = """int fine(int x) { return x; }
int broken(int x) { int unused; return x +; }
"""

KERNEL_SRC = """#include <cmath>
extern "C" double kernel_value(double x) { return std::tanh(x) * 41.0; }
extern "C" int kernel_id() { return 42; }
"""

LOAD = ("import ctypes, sys\n"
        "print(ctypes.CDLL(sys.argv[1]).kernel_id())\n")


class CcServiceBase(E2ECase):
    def compile_warmup(self, *extra):
        """Teaches the service this compiler (family probe, link line) with a
        different source, so the gated requests below only wait on the slot."""
        self.put("warm.cpp", "int warm() { return 1; }\n")
        rc, _, err = self.via([self.CXX, "warm.cpp", "-O2", *extra, "-o",
                               "warm.so" if "-shared" in extra else "warm.o"])
        self.assertEqual(rc, 0, err)

    def gated(self, make_args, count):
        """Runs `count` requests queued behind the gate; returns their results."""
        before = self.counters()  # the gate job counts as one pass-through
        gate = self.hold_slot()
        procs = [self.start_via(make_args(i)) for i in range(count)]
        self.wait_status(lambda s: s["requests"] == before["requests"] + count + 1
                         and s["joins"] == before["joins"] + count - 1,
                         f"{count} requests, {count - 1} of them joined, behind the gate")
        self.release_slot(gate)
        return before, [self.wait_one(p) for p in procs]

    def loads(self, rel):
        r = subprocess.run([PYTHON, "-c", LOAD, self.wpath(rel)], capture_output=True,
                           timeout=60)
        self.assertEqual((r.returncode, r.stdout), (0, b"42\n"), r.stderr)

    # --- 13: a compile error ------------------------------------------------
    def test_compile_error_shared_by_8_waiters_not_cached(self):
        self.start_service(jobs=1)
        self.compile_warmup("-c")
        self.put("bad.cpp", ERROR_SRC)
        args = [self.CXX, "-Wall", "-c", "bad.cpp", "-o", "bad.o"]
        rc0, out0, err0 = self.direct(args)
        self.assertNotEqual(rc0, 0)
        self.assertIn(b"error", err0)
        before, results = self.gated(lambda i: args, N)
        for rc, out, err in results:
            self.assertEqual((rc, out, err), (rc0, out0, err0))
        self.assert_delta(before, executions=2, failures=1, joins=N - 1, hits=0, passthrough=1)
        self.assertFalse(os.path.exists(self.wpath("bad.o")))
        # Never stored: the same request executes again and fails the same way.
        before = self.counters()
        self.assertEqual(self.via(args), (rc0, out0, err0))
        self.assert_delta(before, executions=1, failures=1, hits=0)

    # --- 21: 8 identical one-step .so builds with different -o --------------
    def test_eight_shared_object_builds_one_execution(self):
        self.start_service(jobs=1)
        flags = ["-O2", "-shared", "-fPIC"]
        self.compile_warmup(*flags)
        self.put("k.cpp", KERNEL_SRC)
        os.makedirs(self.wpath("out"))
        rc, _, err = self.direct([self.CXX, "k.cpp", *flags, "-o", "direct.so"])
        self.assertEqual(rc, 0, err)
        before, results = self.gated(
            lambda i: [self.CXX, "k.cpp", *flags, "-o", f"out/k{i}.so"], N)
        for rc, out, err in results:
            self.assertEqual((rc, out, err), (0, b"", b""))
        self.assert_delta(before, executions=2, misses=1, joins=N - 1, failures=0, passthrough=1)
        want = self.bytes_of("direct.so")
        for i in range(N):
            self.assertEqual(self.bytes_of(f"out/k{i}.so"), want, f"out/k{i}.so")
            self.assertEqual(self.mode_of(f"out/k{i}.so"), self.mode_of("direct.so"))
            self.loads(f"out/k{i}.so")

    # --- 14/15: a hit is the direct compile, byte for byte ------------------
    def check_miss_then_hit(self, args, outputs):
        """Direct compile, then a miss and a hit through the service: same
        exit code, stdout, stderr (warnings) and output bytes each time."""
        ref = self.direct(args)
        self.assertEqual(ref[0], 0, ref[2])
        want = {o: self.bytes_of(o) for o in outputs}
        for expect in ("misses", "hits"):
            self.remove(*outputs)
            before = self.counters()
            self.assertEqual(self.via(args), ref, f"{expect}: {args}")
            self.assert_delta(before, **{expect: 1}, requests=1)
            for o in outputs:
                self.assertEqual(self.bytes_of(o), want[o], f"{o} after a {expect[:-2]}")
        return ref

    def test_hits_match_direct_compiles(self):
        self.start_service(jobs=2)
        self.put("inc/h.h", HEADER)
        self.put("w.cpp", WARN_SRC)
        os.makedirs(self.wpath("deps"))
        common = ["-O2", "-Wall", "-DVALUE=5"]
        ref = self.check_miss_then_hit([self.CXX, *common, "-c", "w.cpp", "-o", "w.o"], ["w.o"])
        self.assertIn(b"unused_in_header", ref[2])  # warnings are really replayed
        self.assertIn(b"unused_in_source", ref[2])
        self.check_miss_then_hit([self.CXX, *common, "-S", "w.cpp", "-o", "w.s"], ["w.s"])
        self.check_miss_then_hit([self.CXX, *common, "w.cpp", "-shared", "-fPIC", "-o", "w.so"],
                                 ["w.so"])
        self.check_miss_then_hit([self.CXX, *common, "-c", "w.cpp", "-o", "wd.o", "-MD", "-MF",
                                  "deps/wd.d", "-MT", "custom-target"], ["wd.o", "deps/wd.d"])
        self.assertTrue(self.bytes_of("deps/wd.d").startswith(b"custom-target:"))

    def test_macro_named_probe_through_the_service(self):
        """A __has_include probe whose header is named by a macro: the record
        has the compiler's own lookups, so the first compile is stored and
        the second hits; a header appearing where the probe looks is a miss
        with the right bytes."""
        self.start_service(jobs=2)
        self.put("inc/probe.h", "#define OPT_H <ccpool_opt_zz.h>\n#if __has_include(OPT_H)\n#include OPT_H\n"
                                "#else\n#define OPT 1\n#endif\n")
        self.put("p.cpp", '#include "probe.h"\nint p() { return OPT; }\n')
        os.makedirs(self.wpath("first"))
        args = [self.CXX, "-O2", "-Ifirst", "-Iinc", "-c", "p.cpp", "-o", "p.o"]
        ref = self.direct(args)
        want = self.bytes_of("p.o")
        for expect in ("misses", "hits"):
            self.remove("p.o")
            before = self.counters()
            self.assertEqual(self.via(args), ref)
            self.assert_delta(before, **{expect: 1})
            self.assertEqual(self.bytes_of("p.o"), want)
        s = self.status()
        self.assertEqual(s["not_stored_reasons"], {})
        self.put("first/ccpool_opt_zz.h", "#define OPT 7\n")
        ref = self.direct(args)
        want = self.bytes_of("p.o")
        before = self.counters()
        self.assertEqual(self.via(args), ref)
        self.assert_delta(before, misses=1)
        self.assertEqual(self.bytes_of("p.o"), want)

    def test_a_miss_is_one_commit_and_its_stages_are_timed(self):
        """A direct-mode miss stores its result and the manifest naming it in
        one transaction (one fsync per miss), and `ccpool status` says where
        each stored miss's time went; a hit commits nothing."""
        self.start_service(jobs=2)
        self.compile_warmup("-c")
        self.put("inc/h.h", HEADER)
        before = self.status()
        for i in range(3):
            self.put(f"m{i}.cpp", WARN_SRC + f"int m{i}() {{ return {i}; }}\n")
            args = [self.CXX, "-O2", "-DVALUE=5", "-c", f"m{i}.cpp", "-o", f"m{i}.o"]
            self.assertEqual(self.via(args), self.direct(args))
        self.assertEqual(self.via(args), self.direct(args))  # a hit
        after = self.status()
        self.assertEqual(after["misses"] - before["misses"], 3)
        self.assertEqual(after["hits"] - before["hits"], 1)
        self.assertEqual(after["store_committed_puts"] - before["store_committed_puts"], 6,
                         "a result and a manifest per miss")
        self.assertEqual(after["store_commits"] - before["store_commits"], 3, "one commit per miss")
        self.assertEqual(after["timed_misses"] - before["timed_misses"], 3)
        stages = after["miss_stages_us"]
        self.assertEqual(sorted(stages), sorted(["start", "run", "handoff", "collect", "store",
                                                 "deliver"]))
        self.assertGreater(stages["run"], 0)
        self.assertGreater(stages["store"], 0)

    def test_mmd_depfiles_are_cached(self):
        """make's -MMD -MP auto-dependencies through the service: miss then hit,
        object and .d byte-identical to the direct compile (system headers
        dropped, phony targets added)."""
        self.start_service(jobs=2)
        self.put("inc/h.h", HEADER)
        self.put("w.cpp", "#include <cstdio>\n" + WARN_SRC)
        os.makedirs(self.wpath("obj"))
        self.check_miss_then_hit([self.CXX, "-O2", "-DVALUE=5", "-c", "w.cpp", "-MMD", "-MP", "-o",
                                  "obj/w.o"],
                                 ["obj/w.o", "obj/w.d"])
        self.assertNotIn(b"/usr/include", self.bytes_of("obj/w.d"))
        self.assertIn(b"\ninc/h.h:\n", self.bytes_of("obj/w.d"))
        self.assertEqual(self.status()["passthrough"], 0)

    # --- output modes follow the client's umask ------------------------------
    def test_output_modes_follow_umask(self):
        self.start_service(jobs=2)
        self.put("m.cpp", "extern \"C\" int kernel_id() { return 42; }\n")
        self.put("n.cpp", "extern \"C\" int kernel_id() { return 42; } int n;\n")
        cases = [("m.cpp", (0o022, 0o077)), ("n.cpp", (0o077, 0o022))]  # miss, then hit
        for src, umasks in cases:
            for kind, extra, out in (("obj", ["-c"], src + ".o"),
                                     ("so", ["-shared", "-fPIC"], src + ".so")):
                args = [self.CXX, src, "-O2", *extra, "-o", out]
                for umask in umasks:
                    self.remove(out)
                    rc, _, err = self.direct(args, umask=umask)
                    self.assertEqual(rc, 0, err)
                    want = (self.mode_of(out), self.bytes_of(out))
                    self.assertEqual(want[0], (0o777 if kind == "so" else 0o666) & ~umask)
                    self.remove(out)
                    rc, _, err = self.via(args, umask=umask)
                    self.assertEqual(rc, 0, err)
                    self.assertEqual((self.mode_of(out), self.bytes_of(out)), want,
                                     f"{out} under umask {umask:03o}")
        s = self.status()
        self.assertEqual((s["misses"], s["hits"]), (4, 4))

    # --- a header change misses ---------------------------------------------
    def test_header_change_misses(self):
        self.start_service(jobs=2)
        self.put("inc/v.h", "constexpr int kValue = 1;\n")
        self.put("v.cpp", '#include "inc/v.h"\nint value() { return kValue; }\n')
        args = [self.CXX, "-O2", "-c", "v.cpp", "-o", "v.o"]
        self.check_miss_then_hit(args, ["v.o"])
        old = self.bytes_of("v.o")
        self.put("inc/v.h", "constexpr int kValue = 2;\n")
        self.remove("v.o")
        rc, _, err = self.direct(args)
        self.assertEqual(rc, 0, err)
        want = self.bytes_of("v.o")
        self.assertNotEqual(want, old)
        self.remove("v.o")
        before = self.counters()
        self.assertEqual(self.via(args)[0], 0)
        self.assert_delta(before, misses=1, hits=0, executions=1)
        self.assertEqual(self.bytes_of("v.o"), want)

    # --- pass-through: -E and stdin -------------------------------------------
    def check_pass_through(self, args, stdin=None, out=None):
        """Same result as a direct run, counted as one pass-through execution."""
        ref = self.direct(args, stdin=stdin)
        self.assertEqual(ref[0], 0, ref[2])
        want = self.bytes_of(out) if out else None
        if out:
            self.remove(out)
        before = self.counters()
        self.assertEqual(self.via(args, stdin=stdin), ref, args)
        self.assert_delta(before, passthrough=1, executions=1, hits=0, misses=0)
        if out:
            self.assertEqual(self.bytes_of(out), want, out)
        return ref

    def test_preprocess_passes_through(self):
        self.start_service(jobs=2)
        self.put("p.c", "#define TWICE(x) ((x) * 2)\nint p(int x) { return TWICE(x); }\n")
        ref = self.check_pass_through([self.CC, "-E", "p.c"])
        self.assertIn(b"((x) * 2)", ref[1])

    def test_stdin_source_passes_through(self):
        """`-x c -`: the compiler must read the client's stdin. A service that
        runs it with an empty stdin compiles an empty file and exits 0."""
        self.start_service(jobs=2)
        src = b"int from_stdin(int x) { return x + 1; }\n"
        ref = self.check_pass_through([self.CC, "-x", "c", "-", "-E"], stdin=src)
        self.assertIn(b"from_stdin", ref[1])
        self.check_pass_through([self.CC, "-x", "c", "-", "-c", "-o", "stdin.o"], stdin=src,
                                out="stdin.o")

    def test_reasons_are_counted_and_explained(self):
        """Every pass-through and not-stored result is counted under its stable
        reason code in `ccpool status --json`, and persistently in the store
        (`ccpool cache stats --json`); `ccpool explain` names the same code
        without running the command."""
        self.start_service(jobs=2)
        self.put("p.c", "int p(int x) { return x; }\n")
        self.put("q.c", "int q(int x) { return x; }\n")
        self.put("t.c", "const char* t(void) { return __TIME__; }\n")
        self.check_pass_through([self.CC, "-E", "p.c"])
        self.check_pass_through([self.CC, "-c", "p.c", "q.c"])
        self.check_pass_through([self.CC, "-c", "p.c", "q.c"])
        rc, _, err = self.via([self.CC, "-c", "t.c", "-o", "t.o"])
        self.assertEqual(rc, 0, err)
        s = self.status()
        self.assertEqual(s["passthrough_reasons"],
                         {"unsupported_option:-E": 1, "multiple_sources": 2})
        self.assertEqual(s["not_stored_reasons"], {"time_macro": 1})
        self.assertEqual(s["not_stored"], 1)
        r = subprocess.run([CCPOOL, "explain", "--json", "--", self.CC, "-c", "p.c", "q.c"],
                           env=self.env, cwd=self.work, capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        explained = json.loads(r.stdout)
        self.assertFalse(explained["cacheable"])
        self.assertEqual(explained["reason_code"], "multiple_sources")
        r = subprocess.run([CCPOOL, "explain", "--json", "--", self.CC, "-c", "t.c", "-o", "never.o"],
                           env=self.env, cwd=self.work, capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        explained = json.loads(r.stdout)
        self.assertTrue(explained["cacheable"])
        self.assertEqual(explained["mode"], "record")
        self.assertEqual(explained["store"], "miss")
        self.assertFalse(os.path.exists(self.wpath("never.o")))  # nothing ran
        r = subprocess.run([CCPOOL, "stop", "--socket", self.sock], env=self.env,
                           capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = subprocess.run([CCPOOL, "cache", "stats", "--json", "--dir", self.store],
                           env=self.env, capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        stats = json.loads(r.stdout)
        self.assertEqual(stats["passthrough_reasons"],
                         {"unsupported_option:-E": 1, "multiple_sources": 2})
        self.assertEqual(stats["not_stored_reasons"], {"time_macro": 1})


class GccServiceTest(CcServiceBase):
    CC, CXX = "gcc", "g++"


class ClangServiceTest(CcServiceBase):
    CC, CXX = "clang", "clang++"


del CcServiceBase  # only the concrete compilers run

if __name__ == "__main__":
    main()
