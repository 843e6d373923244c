"""Never a wrong object (issue 11), through the real service with real
gcc/g++ and clang/clang++.

- A join is validated like a hit: two directories with the same main.c but
  different foo.h, compiled at once, each get the object a direct compile
  gives them; so does a request that joins a compile whose header was edited
  while it ran.
- Outputs land as the compiler leaves them: a device node is written in place
  (never replaced) by a compile that runs once, a symlinked output is written
  through and stays a link.

Joins are made deterministic with the gate job (jobs=1) of E2ECase; for the
mid-compile edit, the fault hook `delay_finish` keeps the leader's flight
joinable after its compiler has read foo.h and exited.
"""
import os
import stat
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
from e2e_case import CCPOOL, E2ECase, main  # noqa: E402

MAIN_C = """#include "foo.h"
int value(void) { return VALUE; }
"""

DRIVER_C = """#include <stdio.h>
int value(void);
int main(void) { printf("%d\\n", value()); return 0; }
"""

HOLD_MS = 6000  # the fault hook's hold: the window for the edit and the join


def header(v):
    return f"#define VALUE {v}\n"


class JoinBase(E2ECase):
    def value_of(self, obj):
        """Links obj with a driver (directly, not through ccpool) and runs it."""
        exe = obj + ".exe"
        r = subprocess.run([self.CC, self.wpath("driver.c"), self.wpath(obj), "-o", self.wpath(exe)],
                           capture_output=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = subprocess.run([self.wpath(exe)], capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        return int(r.stdout)

    def setUp(self):
        super().setUp()
        self.put("driver.c", DRIVER_C)

    # --- two directories, same main.c, different foo.h, at once --------------
    def test_join_in_two_dirs_gets_each_dirs_header(self):
        self.start_service(jobs=1)
        for d, v in (("a", 111), ("b", 222)):
            self.put(f"{d}/main.c", MAIN_C)
            self.put(f"{d}/foo.h", header(v))
        args = [self.CC, "-O2", "-c", "main.c", "-o", "main.o"]
        for d in ("a", "b"):  # the reference: direct compiles
            rc, _, err = self.direct(args, cwd=self.wpath(d))
            self.assertEqual(rc, 0, err)
            os.rename(self.wpath(d, "main.o"), self.wpath(d, "direct.o"))
        self.assertEqual((self.value_of("a/direct.o"), self.value_of("b/direct.o")), (111, 222))

        before = self.counters()
        gate = self.hold_slot()
        procs = [self._run([*self.via_prefix(), *args], cwd=self.wpath(d)) for d in ("a", "b")]
        self.wait_status(lambda s: s["joins"] == before["joins"] + 1, "b to join a's flight")
        self.release_slot(gate)
        for p in procs:
            rc, _, err = self.wait_one(p)
            self.assertEqual(rc, 0, err)
        self.assertEqual(self.value_of("a/main.o"), 111)
        self.assertEqual(self.value_of("b/main.o"), 222)
        for d in ("a", "b"):
            self.assertEqual(self.bytes_of(f"{d}/main.o"), self.bytes_of(f"{d}/direct.o"), d)
        d = self.delta(before)
        self.assertEqual(d["executions"], 3, d)  # gate, a, and b's own compile
        self.assertEqual(self.status()["join_reruns"], 1)

    # --- one directory: foo.h edited while the leader's flight is open -------
    def test_join_after_mid_compile_edit_gets_new_header(self):
        # The fault hook holds each finished run before its result is
        # collected: the compiler has read foo.h and exited, the flight is
        # still joinable. Edit foo.h, then send the joiner.
        self.start_service(jobs=2, fault=f"delay_finish={HOLD_MS}")
        self.put("main.c", MAIN_C)
        self.put("foo.h", header(111))
        args = [self.CC, "-O2", "-c", "main.c", "-o", "main.o"]
        before = self.counters()
        holds = self.status()["fault_holds"]
        leader = self._run([*self.via_prefix(), *args])
        # Held once the compiler exited, so it has read foo.h. (`executions`
        # counts at the spawn: the child may not have exec'd gcc yet.)
        self.wait_status(lambda s: s["fault_holds"] == holds + 1,
                         "the leader's compiler to run and exit")
        self.put("foo.h", header(222))
        joiner = self._run([*self.via_prefix(), *args[:-1], "main-b.o"])
        self.wait_status(lambda s: s["joins"] == before["joins"] + 1, "the joiner to join")
        self.assertIsNone(leader.poll(), f"the leader finished before the joiner joined: "
                          f"raise HOLD_MS ({HOLD_MS})")
        for p in (leader, joiner):
            rc, _, err = self.wait_one(p)
            self.assertEqual(rc, 0, err)
        rc, _, err = self.direct([*args[:-1], "ref.o"])
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.value_of("ref.o"), 222)
        self.assertEqual(self.value_of("main.o"), 111)    # what the leader's compile read
        self.assertEqual(self.value_of("main-b.o"), 222)  # what a compile started now reads
        self.assertEqual(self.bytes_of("main-b.o"), self.bytes_of("ref.o"))
        d = self.delta(before)
        self.assertEqual((d["executions"], d["not_stored"]), (2, 1), d)

    # --- outputs that are not plain files -------------------------------------
    def test_device_output_written_in_place_runs_once(self):
        if os.geteuid() != 0:
            self.skipTest("mknod of a character device needs root; run scripts/test.sh as root")
        self.start_service(jobs=1)
        self.put("t.c", "int t(void) { return 1; }\n")
        null = self.wpath("null")
        os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        mode = os.lstat(null).st_mode & 0o7777
        for expect in ("misses", "hits"):
            before = self.counters()
            rc, out, err = self.via([self.CC, "-c", "t.c", "-o", "null"])
            self.assertEqual((rc, out, err), (0, b"", b""))
            st = os.lstat(null)
            self.assertTrue(stat.S_ISCHR(st.st_mode), f"{null} was replaced after a {expect}")
            self.assertEqual(st.st_rdev, os.makedev(1, 3))
            self.assertEqual(st.st_mode & 0o7777, mode, "the device's mode was changed")
            self.assert_delta(before, **{expect: 1}, service_errors=0,
                              executions=1 if expect == "misses" else 0)

    def test_symlinked_output_written_through(self):
        self.start_service(jobs=1)
        self.put("t.c", "int t(void) { return 2; }\n")
        os.makedirs(self.wpath("real"))
        rc, _, err = self.direct([self.CC, "-c", "t.c", "-o", "direct.o"])
        self.assertEqual(rc, 0, err)
        os.symlink("real/t.o", self.wpath("t.o"))
        for expect in ("misses", "hits"):
            if expect == "hits":
                os.remove(self.wpath("real/t.o"))
            before = self.counters()
            rc, _, err = self.via([self.CC, "-c", "t.c", "-o", "t.o"])
            self.assertEqual(rc, 0, err)
            self.assert_delta(before, **{expect: 1})
            self.assertTrue(os.path.islink(self.wpath("t.o")), f"the link was replaced ({expect})")
            self.assertEqual(os.readlink(self.wpath("t.o")), "real/t.o")
            self.assertEqual(self.bytes_of("real/t.o"), self.bytes_of("direct.o"))

    def via_prefix(self):
        return [CCPOOL, "exec", "--socket", self.sock, "--"]


class GccJoinTest(JoinBase):
    CC = "gcc"
    CXX = "g++"


class ClangJoinTest(JoinBase):
    CC = "clang"
    CXX = "clang++"


if __name__ == "__main__":
    main()
