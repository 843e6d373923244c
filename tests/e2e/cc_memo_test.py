"""The validation memo (compiler/validation_memo.h) never serves a stale
answer: real gcc through the real service. Each case warms a hit until the
memo served it (its counters in `ccpool status --json` prove it was used),
then changes an input in a way a stat(2)-only or event-only check could miss,
and requires the next request to be a miss whose object is byte-identical to
a direct compile of the changed tree.
"""
import mmap
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
from e2e_case import CCPOOL, E2ECase, main  # noqa: E402

CLIENT = os.path.join(os.path.dirname(CCPOOL), "ccpool-client")

HEADER = "#define V 1\n"
SOURCE = '#include "h.h"\nint v(void) { return V * 3; }\n'


class GccMemoTest(E2ECase):
    ARGS = ["gcc", "-O2", "-Iinc1", "-Iinc", "-c", "k.c", "-o", "k.o"]

    def memo(self):
        return self.status()["validation_memo"]

    def via_ok(self):
        rc, _, err = self.via(self.ARGS)
        self.assertEqual(rc, 0, err)

    def lessons_taken(self):
        m = self.memo()
        return m["lessons_learned"] + m["lessons_unlearned"]

    def wait_for_lesson(self, before):
        """Waits until the service, idle after a miss, has taken the miss's
        lesson (compiler/planner.h, defer_lessons: taken on its next tick
        once nothing runs, within about a second; learned, or unlearned when
        there was nothing to learn, as under a store fault); returns the
        memo's counters then."""
        for _ in range(100):
            m = self.memo()
            if m["lessons_pending"] == 0 and m["lessons_learned"] + m["lessons_unlearned"] > before:
                return m
            time.sleep(0.1)
        self.fail(f"the miss's lesson was not taken within 10 s: {m}")

    def warm(self, memo=True, fault=None):
        """A miss, whose record the memo keeps once the service is idle, and
        three hits it serves."""
        self.start_service(*([] if memo else ["--no-validation-memo"]), jobs=2, fault=fault)
        self.put("inc/h.h", HEADER)
        self.put("k.c", SOURCE)
        os.makedirs(self.wpath("inc1"))
        before = self.counters()
        lessons = self.lessons_taken()
        self.via_ok()
        learned = self.wait_for_lesson(lessons)
        self.via_ok()
        first = self.memo()
        self.via_ok()
        self.via_ok()
        self.assert_delta(before, misses=1, hits=3, executions=1, not_stored=0)
        if memo and fault is None:
            # The miss taught it; its first hit is served.
            self.assertGreater(learned["learned"], 0, learned)
            self.assertGreater(first["served"], learned["served"], first)
        return learned

    def assert_memo_served(self, learned):
        m = self.memo()
        self.assertTrue(m["enabled"], m)
        self.assertGreater(learned["learned"], 0, learned)
        self.assertGreater(m["served"], learned["served"], m)

    def assert_fresh(self):
        """The next request misses and gives the changed tree's object."""
        old = self.bytes_of("k.o")
        self.remove("k.o")
        rc, _, err = self.direct(self.ARGS, env={"CCPOOL_DISABLE": "1"})
        self.assertEqual(rc, 0, err)
        want = self.bytes_of("k.o")
        self.assertNotEqual(want, old, "the change must change the object")
        self.remove("k.o")
        before = self.counters()
        self.via_ok()
        self.assert_delta(before, misses=1, hits=0, executions=1)
        self.assertEqual(self.bytes_of("k.o"), want)

    def test_edit_between_requests(self):
        self.assert_memo_served(self.warm())
        self.put("inc/h.h", "#define V 12\n")
        self.assert_fresh()

    def test_edit_within_one_timestamp_tick(self):
        self.assert_memo_served(self.warm())
        path = self.wpath("inc/h.h")
        st = os.stat(path)
        with open(path, "r+") as f:  # in place: same inode, same size
            f.write("#define V 2\n")
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        now = os.stat(path)
        self.assertEqual((now.st_ino, now.st_size, now.st_mtime_ns), (st.st_ino, st.st_size, st.st_mtime_ns))
        self.assert_fresh()

    def test_edit_through_a_hard_link(self):
        self.assert_memo_served(self.warm())
        os.makedirs(self.wpath("elsewhere"))
        os.link(self.wpath("inc/h.h"), self.wpath("elsewhere/alias.h"))
        with open(self.wpath("elsewhere/alias.h"), "r+") as f:
            f.write("#define V 3\n")
        self.assertEqual(self.bytes_of("inc/h.h"), b"#define V 3\n")
        self.assert_fresh()

    def test_write_through_a_shared_mapping(self):
        self.assert_memo_served(self.warm())
        fd = os.open(self.wpath("inc/h.h"), os.O_RDWR)
        m = mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        os.close(fd)  # the mapping alone keeps the file open for writing
        try:
            m[len("#define V ")] = ord("4")
            self.assertEqual(self.bytes_of("inc/h.h"), b"#define V 4\n")
            self.assert_fresh()
        finally:
            m.close()

    def test_filesystem_without_events_validates_in_full(self):
        learned = self.warm(fault="drop_fs_events=1")
        m = self.memo()
        self.assertTrue(m["enabled"], m)
        self.assertEqual((learned["learned"], m["learned"], m["served"]), (0, 0, 0), m)
        self.assertGreater(m["refused"], 0, m)
        self.put("inc/h.h", "#define V 5\n")
        self.assert_fresh()

    def test_system_header_replaced_by_a_link_to_an_identical_copy(self):
        """Same bytes, another real path: gcc canonicalizes a system header's
        path (realpath), so its recorded real-path check no longer holds and
        full validation misses; the memo must miss too."""
        self.ARGS = ["gcc", "-O2", "-isystem", "inc", "-c", "k.c", "-o", "k.o"]
        self.assert_memo_served(self.warm())
        self.put("other/h.h", HEADER)
        os.remove(self.wpath("inc/h.h"))
        os.symlink(self.wpath("other/h.h"), self.wpath("inc/h.h"))
        self.remove("k.o")
        rc, _, err = self.direct(self.ARGS, env={"CCPOOL_DISABLE": "1"})
        self.assertEqual(rc, 0, err)
        want = self.bytes_of("k.o")
        self.remove("k.o")
        before = self.counters()
        self.via_ok()
        self.assert_delta(before, misses=1, hits=0, executions=1)
        self.assertEqual(self.bytes_of("k.o"), want)

    def test_switched_off(self):
        self.warm(memo=False)
        m = self.memo()
        self.assertEqual((m["enabled"], m["learned"], m["served"], m["watches"]), (False, 0, 0, 0), m)
        self.put("inc/h.h", "#define V 7\n")
        self.assert_fresh()

    def test_after_a_restart_learned_on_the_second_hit(self):
        """A service that did not see the miss (restarted, the store kept)
        learns an entry on its second hit, not its first; what it learned
        is then served, and an edit still misses."""
        self.warm()
        self.server.stop()
        self.start_service(jobs=2)
        before = self.counters()
        self.via_ok()
        first = self.memo()
        self.assertEqual((first["learned"], first["served"], first["deferred"]), (0, 0, 1), first)
        self.via_ok()
        second = self.memo()
        self.assertGreater(second["learned"], 0, second)
        self.assertEqual(second["served"], 0, second)
        self.via_ok()
        self.assert_delta(before, misses=0, hits=3, executions=0)
        self.assertGreater(self.memo()["served"], 0)
        self.put("inc/h.h", "#define V 8\n")
        self.assert_fresh()

    # --- an entry vouched for as a whole ----------------------------------
    # Once every answer of an entry was served by the memo and nothing it
    # keeps moved since, a hit takes the entry at once (`sets_served`). These
    # requests come through the static ccpool-client, as the shim's do:
    # `ccpool exec` loads shared libraries that gcc's own record names, and
    # that open alone is a move. The expected object of the edited tree is
    # compiled first, in a directory of its own, so that nothing but the
    # edit touches what the memo watches.
    def client_ok(self):
        gcc = shutil.which("gcc")
        rc, _, err = self.wait_one(self._run([CLIENT, f"--inherited-socket={self.sock}", gcc,
                                              *self.ARGS]))
        self.assertEqual(rc, 0, err)

    def expected_after(self, header):
        ref = self.path("reference")
        os.makedirs(os.path.join(ref, "inc"))
        os.makedirs(os.path.join(ref, "inc1"))
        with open(os.path.join(ref, "inc", "h.h"), "w") as f:
            f.write(header)
        with open(os.path.join(ref, "k.c"), "w") as f:
            f.write(SOURCE)
        rc, _, err = self.direct(self.ARGS, env={"CCPOOL_DISABLE": "1"}, cwd=ref)
        self.assertEqual(rc, 0, err)
        with open(os.path.join(ref, "k.o"), "rb") as f:
            return f.read()

    def warm_whole(self):
        """A miss, its lesson, then hits until one takes the entry whole
        (the source may still be fresh: its digest is the memo's)."""
        self.start_service(jobs=2)
        self.put("inc/h.h", HEADER)
        self.put("k.c", SOURCE)
        os.makedirs(self.wpath("inc1"))
        lessons = self.lessons_taken()
        self.client_ok()
        self.wait_for_lesson(lessons)
        # Any process on the machine that opens gcc's libraries or a system
        # header in between moves the memo: `ccpool status` itself loads
        # libc and libzstd, so it is asked only after a few hits, and ctest
        # runs these cases alone (RUN_SERIAL).
        for _ in range(10):
            for _ in range(3):
                self.client_ok()
            m = self.memo()
            if m["sets_served"] > 0:
                break
        self.assertGreater(m["sets_served"], 0, m)
        self.assertEqual(self.counters()["misses"], 1)
        return self.bytes_of("k.o")

    def whole_then(self, change):
        """Two hits with nothing asked of the service in between (`ccpool
        status` itself is a move), then `change()`, then the request that
        must see it; returns the counters' deltas over the three requests."""
        before = self.counters()
        sets = self.memo()["sets_served"]
        self.client_ok()  # asks its answers one by one after the status calls
        self.client_ok()  # takes the entry whole
        change()
        self.client_ok()
        after = self.counters()
        return ({k: after[k] - before[k] for k in ("hits", "misses", "executions")},
                self.memo()["sets_served"] - sets)

    def assert_whole_entry_missed(self, want, old, change):
        self.assertNotEqual(want, old, "the change must change the object")
        delta, sets = self.whole_then(change)
        self.assertGreaterEqual(sets, 1, "the hit before the change took its entry whole")
        self.assertEqual(delta, {"hits": 2, "misses": 1, "executions": 1})
        self.assertEqual(self.bytes_of("k.o"), want)

    def test_whole_entry_then_an_edit_within_one_timestamp_tick(self):
        want = self.expected_after("#define V 7\n")
        old = self.warm_whole()
        path = self.wpath("inc/h.h")
        st = os.stat(path)

        def edit():
            with open(path, "r+") as f:  # in place: same inode, same size
                f.write("#define V 7\n")
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        self.assert_whole_entry_missed(want, old, edit)

    def test_whole_entry_then_a_write_through_a_shared_mapping(self):
        want = self.expected_after("#define V 9\n")
        old = self.warm_whole()
        # The writer keeps its descriptor open: no IN_CLOSE_WRITE either, the
        # open is all that is reported.
        held = []

        def write_through_mapping():
            fd = os.open(self.wpath("inc/h.h"), os.O_RDWR)
            m = mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            held.append((fd, m))
            m[len("#define V ")] = ord("9")
        try:
            self.assert_whole_entry_missed(want, old, write_through_mapping)
        finally:
            for fd, m in held:
                m.close()
                os.close(fd)

    def test_whole_entry_then_a_header_renamed_over(self):
        # An editor's save: nothing opens the inode the memo watches.
        want = self.expected_after("#define V 5\n")
        old = self.warm_whole()

        def save():
            self.put("inc/h.h.tmp", "#define V 5\n")
            os.rename(self.wpath("inc/h.h.tmp"), self.wpath("inc/h.h"))
        self.assert_whole_entry_missed(want, old, save)

    def test_header_appearing_in_a_searched_directory(self):
        self.assert_memo_served(self.warm())
        self.put("inc1/h.h", "#define V 6\n")  # found before inc/h.h now
        self.assert_fresh()


if __name__ == "__main__":
    main()
