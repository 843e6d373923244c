"""ccpool-client-fast (client/fast_client.c) with real g++ and the real
service: what it serves itself is byte-for-byte what the compiler gives, and
everything else reaches ccpool-client or the compiler itself, never nothing.
Each case compares with a direct compile of the same tree.
"""
import os
import shutil
import socket
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
from e2e_case import CCPOOL, SHIM, E2ECase, main  # noqa: E402

BIN = os.path.dirname(CCPOOL)
FAST = os.path.join(BIN, "ccpool-client-fast")
FULL = os.path.join(BIN, "ccpool-client")

# -Wall warns about `unused`: the reply carries stderr.
SOURCE = "int k(int x) { int unused = 0; return x * 7; }\n"
ARGS = ["g++", "-O2", "-Wall", "-c", "k.cpp", "-o", "k.o"]


class FastClientTest(E2ECase):
    def setUp(self):
        super().setUp()
        if not os.access(FAST, os.X_OK):
            self.fail(f"'{FAST}' is missing: build the ccpool-client-fast target")
        self.gxx = shutil.which("g++")
        self.put("k.cpp", SOURCE)

    def reference(self, args=ARGS):
        rc, out, err = self.direct(args)
        want = (rc, out, err, self.bytes_of("k.o") if rc == 0 else None)
        self.remove("k.o")
        return want

    def fast(self, args=ARGS, client=FAST, env=None):
        rc, out, err = self.wait_one(self._run([client, self.gxx, *args], env=env))
        got = (rc, out, err, self.bytes_of("k.o") if os.path.exists(self.wpath("k.o")) else None)
        self.remove("k.o")
        return got

    def test_miss_and_hit_give_the_compilers_bytes_output_and_exit_code(self):
        want = self.reference()
        self.assertIn(b"unused", want[2])
        self.start_service()
        before = self.counters()
        self.assertEqual(self.fast(), want)
        self.assertEqual(self.fast(), want)
        self.assert_delta(before, requests=2, misses=1, hits=1, executions=1)
        # Its request is ccpool-client's: a miss through `ccpool exec` (the
        # same code as ccpool-client) is its hit, and the other way round.
        self.put("k.cpp", SOURCE.replace("7", "9"))
        want9 = self.reference()
        before = self.counters()
        rc, out, err = self.via(ARGS)
        self.assertEqual((rc, out, err, self.bytes_of("k.o")), want9)
        self.remove("k.o")
        self.assertEqual(self.fast(), want9)
        self.assert_delta(before, misses=1, hits=1)
        # A failing compile: its exit code and diagnostics.
        self.put("bad.cpp", "int k( {\n")
        bad = ["g++", "-c", "bad.cpp", "-o", "k.o"]
        want_bad = self.reference(bad)
        self.assertNotEqual(want_bad[0], 0)
        self.assertEqual(self.fast(bad), want_bad)

    def test_a_failed_reply_falls_back_without_asking_again(self):
        want = self.reference()
        self.start_service(fault="throw_in_request=0")  # every request fails in the service
        before = self.counters()
        self.assertEqual(self.fast(), want)
        # One request: ccpool-client ran the compiler at once, and logged why.
        self.assert_delta(before, requests=1, misses=0, hits=0)
        log = self.lines("run/fallbacks.log")
        self.assertEqual(len(log), 1, log)
        self.assertIn("service failed: ccpool internal error", log[0])
        self.assertTrue(log[0].endswith("\t" + self.gxx), log)

    def test_no_service_hands_off_to_the_client_which_starts_one(self):
        want = self.reference()
        self.assertEqual(self.fast(), want)  # ccpool-client starts the service
        self.assertEqual(self.counters()["requests"], 1)
        self.assertEqual(self.fast(), want)  # and this one is served by it
        self.assertEqual(self.counters()["hits"], 1)

    def test_a_socket_directory_others_can_write_is_not_used(self):
        want = self.reference()
        self.start_service()
        before = self.counters()
        run_dir = os.path.dirname(self.sock)
        mode = stat.S_IMODE(os.stat(run_dir).st_mode)
        os.chmod(run_dir, 0o777)
        try:
            rc, out, err, obj = self.fast()
        finally:
            os.chmod(run_dir, mode)
        # ccpool-client refused it too, said so, and ran the compiler itself.
        self.assertIn(b"refusing to use the ccpool socket", err)
        self.assertEqual((rc, out, obj), (want[0], want[1], want[3]))
        self.assert_delta(before, requests=0)

    def test_a_listener_of_another_user_is_sent_nothing(self):
        if os.geteuid() != 0:
            self.skipTest("needs root: a listener of another uid in a directory of ours")
        want = self.reference()
        sock_dir = self.path("foreign")
        os.makedirs(sock_dir, mode=0o700)
        sock_path = os.path.join(sock_dir, "sock")
        ready_r, ready_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # bound by us, listening as nobody: SO_PEERCRED names nobody
            try:
                srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                srv.bind(sock_path)
                os.setresgid(65534, 65534, 65534)
                os.setresuid(65534, 65534, 65534)
                srv.listen(8)
                os.write(ready_w, b"x")
                got, deadline = 0, time.monotonic() + 3
                srv.settimeout(0.1)
                conns = []
                while time.monotonic() < deadline:
                    try:
                        c, _ = srv.accept()
                        c.settimeout(0.1)
                        conns.append(c)
                    except socket.timeout:
                        pass
                    for c in conns:
                        try:
                            got += len(c.recv(65536))
                        except (socket.timeout, OSError):
                            pass
                os._exit(1 if got else 0)
            finally:
                os._exit(2)
        os.close(ready_w)
        self.assertEqual(os.read(ready_r, 1), b"x")
        rc, out, err, obj = self.fast(env={"CCPOOL_SOCKET": sock_path})
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0, "the listener was sent bytes")
        self.assertIn(b"runs as uid 65534", err)  # ccpool-client's refusal
        self.assertEqual((rc, out, obj), (want[0], want[1], want[3]))

    def test_a_listener_that_accepts_nothing_does_not_hold_the_compile(self):
        # Its queue full, a connect waits; ccpool-client gives it 2 s, and so
        # must the fast client, which then hands the exec on.
        want = self.reference()
        sock_dir = self.path("stuck")
        os.makedirs(sock_dir, mode=0o700)
        sock_path = os.path.join(sock_dir, "sock")
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(sock_path)
        srv.listen(0)
        queued = []
        try:
            while True:  # fill the queue
                c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                c.setblocking(False)
                try:
                    c.connect(sock_path)
                except BlockingIOError:
                    c.close()
                    break
                queued.append(c)
                self.assertLess(len(queued), 64, "the listener's queue never filled")
            p = self._run([FAST, self.gxx, *ARGS],
                          env={"CCPOOL_SOCKET": sock_path, "CCPOOL_NO_AUTOSTART": "1"})
            try:
                out, err = p.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                self.fail("the compile waited on a listener that accepts nothing")
            rc = p.returncode
        finally:
            for c in queued:
                c.close()
            srv.close()
        self.assertEqual((rc, out, err, self.bytes_of("k.o")), want)

    def test_disabled_runs_the_compiler(self):
        want = self.reference()
        self.start_service()
        before = self.counters()
        self.assertEqual(self.fast(env={"CCPOOL_DISABLE": "1"}), want)
        self.assert_delta(before, requests=0)

    def test_alone_and_without_a_service_it_runs_the_compiler(self):
        want = self.reference()
        alone = self.path("alone")
        os.makedirs(alone)
        shutil.copy2(FAST, os.path.join(alone, "ccpool-client-fast"))
        got = self.fast(client=os.path.join(alone, "ccpool-client-fast"),
                        env={"CCPOOL_SOCKET": self.path("no-such-dir", "sock")})
        self.assertEqual(got, want)

    def test_the_shim_execs_the_fast_client_beside_ccpool_client(self):
        self.need_shim()
        want = self.reference()
        self.start_service()
        # A bin directory whose ccpool-client-fast records each start.
        shim_bin = self.path("shim-bin")
        os.makedirs(shim_bin)
        os.symlink(FULL, os.path.join(shim_bin, "ccpool-client"))
        record = self.path("fast-starts")
        wrapper = os.path.join(shim_bin, "ccpool-client-fast")
        with open(wrapper, "w") as f:
            f.write(f"#!/bin/sh\necho started >> '{record}'\nexec '{FAST}' \"$@\"\n")
        os.chmod(wrapper, 0o755)
        env = {"LD_PRELOAD": SHIM, "CCPOOL_CLIENT": os.path.join(shim_bin, "ccpool-client")}
        before = self.counters()
        for _ in range(2):
            rc, out, err = self.wait_one(self._run(["/bin/sh", "-c", " ".join(ARGS)], env=env))
            self.assertEqual((rc, out, err, self.bytes_of("k.o")), want)
            self.remove("k.o")
        with open(record) as f:
            self.assertEqual(f.read(), "started\nstarted\n")
        self.assert_delta(before, requests=2, misses=1, hits=1)


if __name__ == "__main__":
    main()
