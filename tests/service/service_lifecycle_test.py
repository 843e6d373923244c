"""Node service, lifecycle and robustness side (issue 3): one instance per
socket, auto-start race, shutdown with running jobs, cross-uid refusal,
protocol abuse, fault injection."""
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
from harness import (BIN, CCPOOL, E_PERMISSION, E_PROTOCOL, E_UNSUPPORTED, T_HELLO,  # noqa: E402
                     T_HELLO_OK, T_PONG, T_PING, T_STATUS, ServiceCase, frame, hello_payload,
                     main, pid_gone, raw_connect, read_reply, serve_pids, wait_until)

# Runs 30 s in the service (recording its pid and its background child's);
# once the test has created the marker, a run exits at once (the clients'
# local fallback after "stopping"). $1 = label.
LONG_TOOL = r"""#!/bin/sh
if [ -e stopped ]; then echo "local $1"; exit 0; fi
sleep 30 >/dev/null 2>&1 &
echo "$$ $!" > "pids/$1"
wait
echo "service $1"
"""

# A declared job writing its output; counts its runs. $1 = tag.
DECLARED_TOOL = r"""#!/bin/sh
echo x >> runs
printf 'out %s\n' "$(cat in.txt)" > out.txt
echo "ran $1"
"""


# A declared job that never finishes by itself (for --job-timeout); records
# its pid and its background child's.
SLOW_DECLARED_TOOL = r"""#!/bin/sh
sleep 120 >/dev/null 2>&1 &
echo "$$ $!" > "runs/$$"
wait
echo done > out.txt
"""


SETPRIV = "/usr/bin/setpriv"
OTHER_UID = 65534


def other_uid_cannot_run(ccpool):
    """None when uid 65534 can run `ccpool --version` (the static front door
    and the ccpool-cli it hands every other command to); otherwise why not, for
    a skip. Asked before any cross-uid assertion, so a refusal by the service is
    never mistaken for a binary that cannot run, nor the other way round."""
    r = subprocess.run([SETPRIV, f"--reuid={OTHER_UID}", f"--regid={OTHER_UID}", "--clear-groups",
                        ccpool, "--version"], capture_output=True, timeout=60)
    if r.returncode == 0 and r.stdout.startswith(b"ccpool "):
        return None
    why = (r.stderr or r.stdout).decode(errors="replace").strip()
    return f"uid {OTHER_UID} cannot run {ccpool} --version (exit {r.returncode}): {why}"


class ServiceLifecycleTest(ServiceCase):
    def require_root_setpriv(self):
        if os.geteuid() != 0:
            self.skipTest("needs root to run a client under another uid (setpriv)")
        if not os.access(SETPRIV, os.X_OK):
            self.skipTest("setpriv (util-linux) is not installed")

    def test_second_serve_reports_running_instance(self):
        service = self.start_service()
        r = subprocess.run([CCPOOL, "serve", "--socket", self.sock, "--dir", self.store],
                           env=self.env, capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 1, r.stderr)  # a refusal; racing auto-starts ignore it
        self.assertIn(b"a service is already running", r.stderr)
        self.assertIn(f"(pid {service.pid})".encode(), r.stderr)
        self.assertEqual(serve_pids(self.sock), [service.pid])

    def test_autostart_race(self):
        """8 concurrent `ccpool exec` on a fresh socket start exactly one service."""
        procs = [self.spawn(["/bin/echo", f"hi {i}"]) for i in range(8)]
        for i, (rc, out, err) in enumerate(self.finish(procs)):
            self.assertEqual((rc, out), (0, f"hi {i}\n".encode()), err)
        services = serve_pids(self.sock)
        self.assertEqual(len(services), 1, f"serve processes on this socket: {services}")
        s = self.status()
        self.assertEqual(s["pid"], services[0])
        self.assertEqual(s["requests"], 8, "some clients did not reach the auto-started service")
        self.assertEqual(s["fallbacks"], 0)
        self.assertEqual(os.stat(self.run_dir).st_mode & 0o777, 0o700)

    def test_sigterm_with_running_jobs(self):
        """SIGTERM during 4 running jobs: their process groups are gone, the
        waiters get "stopping" and run the tool locally, the service exits 0."""
        self.shutdown_with_running_jobs(lambda service: service.send_signal(signal.SIGTERM))

    def test_sigint_with_running_jobs(self):
        self.shutdown_with_running_jobs(lambda service: service.send_signal(signal.SIGINT))

    def test_stop_with_running_jobs(self):
        def stop(_):
            r = subprocess.run([CCPOOL, "stop", "--socket", self.sock], env=self.env,
                               capture_output=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
        self.shutdown_with_running_jobs(stop)

    def shutdown_with_running_jobs(self, stop):
        tool = self.write("work/long.sh", LONG_TOOL, 0o755)
        pid_dir = os.path.join(self.work, "pids")
        os.makedirs(pid_dir)
        self.pid_files.append(pid_dir)
        service = self.start_service(jobs=4)
        procs = [self.spawn(["/bin/sh", tool, str(i)], env={"CCPOOL_NO_AUTOSTART": "1"})
                 for i in range(4)]
        wait_until(lambda: len(os.listdir(pid_dir)) == 4, "4 running jobs to record their pids")
        s = self.wait_status(lambda s: s["running"] == 4, "4 running jobs")
        self.assertEqual(len(s["running_jobs"]), 4)
        pids = self.recorded_pids()
        self.assertEqual(len(pids), 8)
        open(os.path.join(self.work, "stopped"), "w").close()
        stop(service)
        self.assertEqual(service.wait(60), 0)
        for pid in pids:
            wait_until(lambda: pid_gone(pid), f"job process {pid} to be gone")
        for i, (rc, out, err) in enumerate(self.finish(procs)):
            self.assertEqual((rc, out), (0, f"local {i}\n".encode()), err)
        self.assertEqual(serve_pids(self.sock), [])
        fallbacks = self.lines("run/fallbacks.log")
        self.assertEqual(len(fallbacks), 4, fallbacks)

    def test_status_keys(self):
        """`ccpool status --json` carries every key the issue and docs name."""
        self.start_service("--mem-budget", "1G", jobs=3)
        s = self.status()
        for key in ("jobs", "mem_budget", "running", "queued", "peak_running", "requests", "hits",
                    "misses", "joins", "executions", "failures", "cancelled", "passthrough",
                    "clients", "running_jobs", "fallbacks", "refused_peers", "protocol_errors",
                    "not_stored", "store_errors", "service_errors"):
            self.assertIn(key, s)
        self.assertEqual((s["jobs"], s["mem_budget"]), (3, 1 << 30))
        self.assertEqual(s["running_jobs"], [])
        self.assertGreaterEqual(s["clients"], 1)  # this status request itself
        for key in ("running", "queued", "peak_running", "requests", "executions"):
            self.assertEqual(s[key], 0, key)

    def test_job_timeout_shared_failure(self):
        """--job-timeout kills the job's process group; every waiter gets the
        same failure with a message, and nothing is cached."""
        self.write("work/slow.sh", SLOW_DECLARED_TOOL, 0o755)
        self.write("work/in.txt", "one")
        os.makedirs(os.path.join(self.work, "runs"))
        self.pid_files.append(os.path.join(self.work, "runs"))
        service = self.start_service("--job-timeout", "1s", jobs=2)
        env = {"CCPOOL_NO_AUTOSTART": "1"}
        procs = [self.spawn(["/bin/sh", "slow.sh"], inputs=["in.txt"], outputs=["out.txt"], env=env)
                 for _ in range(4)]
        results = self.finish(procs)
        self.assertEqual(len(set(results)), 1, f"waiters got different results: {results}")
        rc, out, err = results[0]
        self.assertNotEqual(rc, 0)
        self.assertRegex(err.decode(), r"(?i)time")
        self.assertFalse(os.path.exists(os.path.join(self.work, "out.txt")))
        s = self.status()
        self.assertEqual((s["executions"], s["failures"], s["hits"]), (1, 1, 0))
        self.assertEqual(s["joins"], 3)
        for pid in self.recorded_pids():
            wait_until(lambda: pid_gone(pid, service.pid), f"timed-out job process {pid} to die")

    def test_relay_byte_exact(self):
        """Exit code, stdout and stderr (binary, 1 MiB) relayed byte-exact, for
        a pass-through run, a miss and a hit."""
        blob = bytes(range(256)) * 4096 + b"\0\r\n\xff"
        with open(self.path("work/blob"), "wb") as f:
            f.write(blob)
        self.write("work/emit.sh", 'cat blob; printf "err\\0\\377" >&2; cat in.txt > out.txt; exit 42\n',
                   0o755)
        self.write("work/in.txt", "x")
        self.start_service()
        expected = (42, blob, b"err\0\xff")
        self.assertEqual(self.run_exec(["/bin/sh", "emit.sh"]), expected)
        for _ in range(2):  # a failing declared job is never cached: runs twice
            self.assertEqual(self.run_exec(["/bin/sh", "emit.sh"], inputs=["in.txt"],
                                           outputs=["out.txt"]), expected)
        self.write("work/ok.sh", "cat blob; printf 'e\\377' >&2; cat in.txt > out.txt\n", 0o755)
        for _ in range(2):  # a miss, then a hit
            self.assertEqual(self.run_exec(["/bin/sh", "ok.sh"], inputs=["in.txt"],
                                           outputs=["out.txt"]), (0, blob, b"e\xff"))
        s = self.status()
        self.assertEqual((s["executions"], s["passthrough"], s["hits"], s["failures"]), (4, 1, 1, 3))

    def test_no_autostart_falls_back(self):
        """CCPOOL_NO_AUTOSTART=1 with no service: the client runs the tool
        itself, logs the fallback, and no service is started."""
        rc, out, _ = self.run_exec(["/bin/sh", "-c", "echo local; exit 7"],
                                   env={"CCPOOL_NO_AUTOSTART": "1"})
        self.assertEqual((rc, out), (7, b"local\n"))
        self.assertEqual(serve_pids(self.sock), [])
        self.assertEqual(len(self.lines("run/fallbacks.log")), 1)

    def test_exec_keeps_dash_arguments(self):
        """Every argument after PROGRAM reaches the tool and the key, dashes
        included, through both `ccpool exec` and `ccpool-cli exec`: `-x` and
        `-y` must never share a result."""
        self.start_service()
        script = os.path.join(self.dir, "argv.py")
        with open(script, "w") as f:
            f.write("import sys\nopen(sys.argv[1], 'w').write(repr(sys.argv[2:]))\n")
        out = os.path.join(self.dir, "argv.txt")
        for binary in ("ccpool", "ccpool-cli"):
            for flag in ("-x", "-y"):
                args = [os.path.join(BIN, binary), "exec", "--socket", self.sock, "--output", out,
                        "--", "/usr/bin/python3", script, out, "X", "-c", "-n", "-o", "hi", flag]
                r = subprocess.run(args, env=self.env, capture_output=True, timeout=60)
                self.assertEqual(r.returncode, 0, r.stderr)
                with open(out) as f:
                    self.assertEqual(f.read(), repr(["X", "-c", "-n", "-o", "hi", flag]), binary)
        r = subprocess.run([os.path.join(BIN, "ccpool-cli"), "exec", "--bogus"], env=self.env,
                           capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 2, r.stderr)

    def test_stop_command(self):
        service = self.start_service()
        r = subprocess.run([CCPOOL, "stop", "--socket", self.sock], env=self.env,
                           capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(service.wait(60), 0)
        self.assertIsNone(self.try_status())

    def test_cross_uid_refused(self):
        self.require_root_setpriv()
        why = other_uid_cannot_run(CCPOOL)
        if why:
            self.skipTest(why)
        self.start_service()
        # Let uid 65534 reach the socket, so the service's own SO_PEERCRED
        # check (not file permissions) is what refuses it. The socket dir
        # stays non-writable for group/other, which the service requires.
        os.chmod(self.dir, 0o755)
        os.chmod(self.run_dir, 0o711)
        os.chmod(self.sock, 0o666)
        before = self.status()["refused_peers"]
        r = subprocess.run(["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            CCPOOL, "status", "--socket", self.sock, "--json"],
                           env=self.env, capture_output=True, timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(r.stdout, b"")
        # Our client refuses first: the socket's directory is not uid 65534's
        # (docs/threat-model.md), so it never reaches the service.
        self.assertIn(f"'{self.run_dir}' is owned by uid {os.geteuid()}", r.stderr.decode())
        self.assertEqual(self.status()["refused_peers"], before)
        # A client that does not check (raw protocol) is refused by the
        # service with a permission error frame.
        r = subprocess.run(["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            "/usr/bin/python3", "-c", RAW_HELLO, self.sock],
                           capture_output=True, timeout=60)
        self.assertEqual(r.stdout.decode().split()[:2], ["error", str(E_PERMISSION)], r.stderr)
        self.assertEqual(self.status()["refused_peers"], before + 1)

    def test_cross_uid_guard_skips_unrunnable(self):
        """The cross-uid skip guard tells a binary uid 65534 cannot run from one
        it can: a front door in a directory it cannot enter (the exec fails), and
        a front door whose ccpool-cli it cannot run (ccpool itself prints the
        error, starting with "ccpool:"), both give a reason naming the cause."""
        self.require_root_setpriv()
        os.chmod(self.dir, 0o755)
        closed = self.path("closed")
        os.makedirs(closed, mode=0o700)
        half = self.path("half")
        os.makedirs(half, mode=0o755)
        for d in (closed, half):
            for name in ("ccpool", "ccpool-cli"):
                shutil.copy2(os.path.join(BIN, name), os.path.join(d, name))
        os.chmod(os.path.join(half, "ccpool-cli"), 0o700)
        why = other_uid_cannot_run(os.path.join(closed, "ccpool"))
        self.assertIsNotNone(why, "no skip reason for a copy in a 0700 directory of root")
        self.assertIn("Permission denied", why)
        why = other_uid_cannot_run(os.path.join(half, "ccpool"))
        self.assertIsNotNone(why, "ccpool ran as uid 65534 without being able to run its ccpool-cli")
        self.assertIn("ccpool: cannot run", why)
        self.assertIn(os.path.join(half, "ccpool-cli"), why)
        os.chmod(os.path.join(half, "ccpool-cli"), 0o755)
        self.assertIsNone(other_uid_cannot_run(os.path.join(half, "ccpool")))

    def abuse(self, data, close_write=False):
        """Sends `data` on a fresh connection; returns what came back."""
        s = raw_connect(self.sock)
        try:
            s.sendall(data)
            if close_write:
                s.shutdown(socket.SHUT_WR)
            return read_reply(s)
        finally:
            s.close()

    def assert_still_serves(self):
        s = self.status()
        rc, out, _ = self.run_exec(["/bin/echo", "still here"])
        self.assertEqual((rc, out), (0, b"still here\n"))
        return s

    def test_protocol_abuse(self):
        self.start_service()
        hello = frame(T_HELLO, hello_payload())
        cases = {
            "truncated payload": frame(T_HELLO, hello_payload()[:4]),
            "oversized length": frame(T_HELLO, length=0xFFFFFFFF),
            "garbage": b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
            "framing version": frame(T_HELLO, hello_payload(), version=2),
            "unknown type": frame(200, b""),
            "first frame not hello": frame(T_PING),
            "reply type as request": hello + frame(T_HELLO_OK, hello_payload()),
        }
        for name, data in cases.items():
            with self.subTest(name):  # every case is checked even when one fails
                before = self.status()["protocol_errors"]
                if name == "reply type as request":
                    s = raw_connect(self.sock)
                    s.sendall(data)
                    self.assertEqual(read_reply(s)[0], T_HELLO_OK)
                    kind, value = read_reply(s)
                    s.close()
                else:
                    kind, value = self.abuse(data)
                self.assertIn(kind, ("error", "eof"), f"{name}: got {kind} {value}")
                if kind == "error":
                    self.assertEqual(value[0], E_PROTOCOL, f"{name}: {value}")
                after = self.assert_still_serves()["protocol_errors"]
                self.assertGreater(after, before, f"{name} was not counted in protocol_errors")
        # Wrong protocol version in hello: unsupported, naming both versions.
        kind, value = self.abuse(frame(T_HELLO, hello_payload(version=2)))
        self.assertEqual(kind, "error")
        self.assertEqual(value[0], E_UNSUPPORTED, value)
        self.assertIn("2", value[1])
        self.assertIn("1", value[1])
        # A frame cut off by EOF: the connection is closed (maybe after an error).
        kind, _ = self.abuse(hello[:7], close_write=True)
        self.assertIn(kind, ("error", "eof"))
        self.assert_still_serves()

    def test_slow_client(self):
        """A client sending one byte a second holds only its own connection."""
        self.start_service()
        baseline = self.status()["clients"]  # the status client itself
        slow = raw_connect(self.sock)
        hello = frame(T_HELLO, hello_payload())
        for i in range(4):
            slow.sendall(hello[i:i + 1])
            self.assert_still_serves()
            time.sleep(1)
        slow.sendall(hello[4:])  # completes a valid hello late: still served
        self.assertEqual(read_reply(slow)[0], T_HELLO_OK)
        slow.sendall(frame(T_PING))
        self.assertEqual(read_reply(slow)[0], T_PONG)
        slow.sendall(b"\xff" * 12)
        kind, value = read_reply(slow)
        slow.close()
        self.assertIn(kind, ("error", "eof"))
        self.assertGreaterEqual(self.assert_still_serves()["protocol_errors"], 1)
        self.wait_status(lambda s: s["clients"] == baseline, "the slow client to be dropped")

    def declared(self, tag):
        return self.run_exec(["/bin/sh", "tool.sh", tag], inputs=["in.txt"], outputs=["out.txt"])

    def test_fault_kill_first_exec(self):
        """CCPOOL_FAULT=kill_exec=1: the first execution is killed; its waiter
        gets a failure, nothing is cached, and the next request runs again."""
        # The fault kills right after spawn; a tool quick enough to exit first
        # (the service's thread preempted on a loaded machine) is a zombie the
        # SIGKILL no longer changes, and the run succeeds: the tool waits first.
        slow_start = DECLARED_TOOL.replace("#!/bin/sh\n", "#!/bin/sh\nsleep 1\n")
        self.write("work/tool.sh", slow_start, 0o755)
        self.write("work/in.txt", "one")
        self.start_service(fault="kill_exec=1")
        rc, out, _ = self.declared("a")
        self.assertNotEqual(rc, 0, "the killed execution was reported as a success")
        s = self.status()
        self.assertEqual((s["executions"], s["failures"], s["hits"]), (1, 1, 0))
        rc, out, _ = self.declared("a")
        self.assertEqual((rc, out), (0, b"ran a\n"))
        self.assertEqual(self.read("work/out.txt"), "out one\n")
        s = self.status()
        self.assertEqual((s["executions"], s["hits"]), (2, 0))
        rc, out, _ = self.declared("a")
        self.assertEqual((rc, out), (0, b"ran a\n"))
        self.assertEqual(self.status()["hits"], 1)
        self.assertIn("FAULT INJECTION", self.read("run/ccpool.log"))

    def test_fault_store_write_fails(self):
        """CCPOOL_FAULT=fail_store_write=0: results are served but never stored."""
        self.write("work/tool.sh", DECLARED_TOOL, 0o755)
        self.write("work/in.txt", "one")
        self.start_service(fault="fail_store_write=0")
        for _ in range(2):
            rc, out, _ = self.declared("b")
            self.assertEqual((rc, out), (0, b"ran b\n"))
            self.assertEqual(self.read("work/out.txt"), "out one\n")
        s = self.status()
        self.assertEqual((s["executions"], s["hits"]), (2, 0))
        self.assertGreaterEqual(s["store_errors"], 2)
        self.assertEqual(len(self.lines("work/runs")), 2)

    def test_fault_exceptions_answer_every_request(self):
        """CCPOOL_FAULT=throw_in_request=1,throw_in_start=1 (issue 12): an
        exception in a request's work or in a job's start becomes a failed
        reply, so the client runs the tool itself at once instead of waiting
        an hour; the job's slot is freed (jobs=1) and the next request runs."""
        self.write("work/tool.sh", DECLARED_TOOL, 0o755)
        self.write("work/in.txt", "one")
        self.start_service(fault="throw_in_request=1,throw_in_start=1", jobs=1)
        for _ in range(2):  # request 1 throws; request 2's job start throws
            rc, out, _ = self.declared("a")
            self.assertEqual((rc, out), (0, b"ran a\n"))
        s = self.status()
        self.assertEqual((s["executions"], s["service_errors"]), (0, 2))
        rc, out, _ = self.declared("a")
        self.assertEqual((rc, out), (0, b"ran a\n"))
        s = self.status()
        self.assertEqual((s["executions"], s["service_errors"]), (1, 2))
        self.assertEqual(len(self.lines("work/runs")), 3)
        self.assertIn("injected by CCPOOL_FAULT=throw_in_request", self.read("run/ccpool.log"))


# Run under another uid: hello, print "error <code>" or the reply type.
RAW_HELLO = r"""
import os, socket, struct, sys
s = socket.socket(socket.AF_UNIX); s.settimeout(15); s.connect(sys.argv[1])
try:  # the service may refuse and close before reading anything
    s.sendall(b"CCPL\x01\x01\x00\x00" + struct.pack("<I", 16) + struct.pack("<IQi", 1, 0, os.getpid()))
except OSError:
    pass
h = b""
while len(h) < 12:
    c = s.recv(12 - len(h))
    if not c: print("eof"); sys.exit(0)
    h += c
n = struct.unpack("<I", h[8:12])[0]
p = b""
while len(p) < n:
    c = s.recv(n - len(p))
    if not c: break
    p += c
print("error", struct.unpack("<H", p[:2])[0]) if h[5] == 11 else print("type", h[5])
"""

if __name__ == "__main__":
    main()
