"""The validation memo (compiler/validation_memo.h) never serves a stale
answer: real gcc through the real service. Each case warms a hit until the
memo served it (its counters in `ccpool status --json` prove it was used),
then changes an input in a way a stat(2)-only or event-only check could miss,
and requires the next request to be a miss whose object is byte-identical to
a direct compile of the changed tree.
"""
import mmap
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
from e2e_case import E2ECase, main  # noqa: E402

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

    def test_header_appearing_in_a_searched_directory(self):
        self.assert_memo_served(self.warm())
        self.put("inc1/h.h", "#define V 6\n")  # found before inc/h.h now
        self.assert_fresh()


if __name__ == "__main__":
    main()
