"""Requesters in another mount namespace (issue 22): a container, a job with
a private /tmp. The service serves each in its own view of the filesystem
(service/mount_view.h): other content at the same path gets its own correct
object, written in the requester's view, and the service's view is left
alone; two private mounts with identical files share one execution. Needs
root for `unshare -m` and mount (exit 125 with the reason otherwise).
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
from e2e_case import CCPOOL, E2ECase, main  # noqa: E402


class ViewTest(E2ECase):
    def setUp(self):
        super().setUp()
        r = subprocess.run(["unshare", "-m", "--propagation", "private", "true"], capture_output=True)
        if r.returncode != 0:
            self.skipTest("unshare -m is not permitted here: " + r.stderr.decode(errors="replace").strip())

    def in_private_mount(self, body):
        """Runs `body` (bash) in a new mount namespace where work/x is a
        fresh tmpfs and the cwd; work/out is shared with the host."""
        x = self.wpath("x")
        script = (f"set -e; mount -t tmpfs tmpfs {x}; cd {x}; {body}")
        r = subprocess.run(["unshare", "-m", "--propagation", "private", "bash", "-c", script], env=self.env,
                           capture_output=True, timeout=120)
        return r.returncode, r.stdout, r.stderr

    def via_cmd(self, args):
        return " ".join([CCPOOL, "exec", "--socket", self.sock, "--", *args])

    def compile_in_view(self, value, tag):
        """In a private mount: a.c returning `value`, compiled through the
        service and directly (the shim is not loaded: a plain reference);
        both objects and the .d (to stdout) copied out."""
        out = self.wpath("out")
        args = [self.CC, "-O2", "-c", "a.c", "-o", "a.o"]
        body = (f"echo 'int f(void) {{ return {value}; }}' > a.c; "
                f"{self.via_cmd(args + ['-MD', '-MF', '/dev/stdout'])} > {out}/{tag}.via.d; cp a.o {out}/{tag}.via.o; "
                f"rm a.o; {' '.join(args)} -MD -MF /dev/stdout > {out}/{tag}.direct.d; cp a.o {out}/{tag}.direct.o")
        return self.in_private_mount(body)

    def read(self, rel):
        with open(self.wpath(rel), "rb") as f:
            return f.read()

    def test_private_mount_is_served_in_its_own_view(self):
        self.start_service(jobs=2)
        self.put("x/a.c", "int f(void) { return 111; }\n")
        os.makedirs(self.wpath("out"))
        before = self.counters()
        rc, out, err = self.compile_in_view(222, "one")
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.read("out/one.via.o"), self.read("out/one.direct.o"))
        self.assertEqual(self.read("out/one.via.d"), self.read("out/one.direct.d"))
        self.assertIn(b"a.o: a.c", self.read("out/one.via.d"))
        # The service's view is untouched: its /x still holds the host's file.
        self.assertFalse(os.path.exists(self.wpath("x/a.o")))
        self.assertEqual(self.read("x/a.c"), b"int f(void) { return 111; }\n")
        self.assert_delta(before, misses=1, executions=1, hits=0, passthrough=0)
        # A second private mount with the same files: one execution in all.
        before = self.counters()
        rc, out, err = self.compile_in_view(222, "two")
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.read("out/two.via.o"), self.read("out/one.direct.o"))
        self.assertEqual(self.read("out/two.via.d"), self.read("out/two.direct.d"))
        self.assert_delta(before, hits=1, executions=0, passthrough=0)
        # Other content at the same path: its own object.
        before = self.counters()
        rc, out, err = self.compile_in_view(333, "three")
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.read("out/three.via.o"), self.read("out/three.direct.o"))
        self.assertNotEqual(self.read("out/three.via.o"), self.read("out/one.direct.o"))
        self.assert_delta(before, misses=1, executions=1, hits=0)

    def test_host_file_does_not_stand_in_for_a_missing_one(self):
        """The host has work/x/a.c; the private mount has none: the compile
        fails exactly as gcc fails there, and nothing is written."""
        self.start_service(jobs=2)
        self.put("x/a.c", "int f(void) { return 111; }\n")
        rc, out, err = self.in_private_mount(self.via_cmd([self.CC, "-O2", "-c", "a.c", "-o", "a.o"]))
        self.assertNotEqual(rc, 0)
        self.assertIn(b"a.c", err)
        self.assertFalse(os.path.exists(self.wpath("x/a.o")))


if __name__ == "__main__":
    main()
