"""Node service, documented behaviour no other suite exercised (issue 17):
exit after --idle-timeout, `status --watch`, log rotation and the instance
keys of `status --json`.

Real processes, like the other service suites. The idle test waits for the
service to exit on its own; the only fixed wait is a lower bound (the service
must still be up while a job runs), which a slow machine cannot break.
"""
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
from harness import CCPOOL, HANG_GUARD_S, ServiceCase, main, wait_until  # noqa: E402

# Waits (bounded) for the gate file $1, then says so.
GATED_TOOL = r"""#!/bin/sh
i=0
while [ ! -e "$1" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done
echo "gate seen"
"""

# A declared job: reads in.txt, writes out.txt.
DECLARED_TOOL = r"""#!/bin/sh
printf 'out %s\n' "$(cat in.txt)" > out.txt
"""

CLEAR = b"\x1b[H\x1b[2J"
LOG_MAX = 10 << 20  # docs/service.md: ccpool.log rotates at 10 MiB, keeping 3 old files


class ServiceCliTest(ServiceCase):
    def test_idle_timeout_exits(self):
        """--idle-timeout 1s: the service stays while a job runs, then exits 0
        by itself once nothing is connected or running, and says why."""
        tool = self.write("work/gated.sh", GATED_TOOL, 0o755)
        gate = self.path("gate")
        service = self.start_service(idle_timeout="1s")
        client = self.spawn(["/bin/sh", tool, gate])
        self.wait_status(lambda s: s["running"] == 1, "the gated job to run")
        time.sleep(3)  # three idle timeouts: a running job must keep the service up
        self.assertIsNone(service.poll(), "the service exited while a job was running")
        open(gate, "w").close()
        rc, out, err = self.finish([client])[0]
        self.assertEqual((rc, out), (0, b"gate seen\n"), err)
        try:
            code = service.wait(HANG_GUARD_S)
        except subprocess.TimeoutExpired:
            self.fail(f"the service did not exit within {HANG_GUARD_S} s of a 1 s idle timeout")
        self.assertEqual(code, 0)
        self.service_log.flush()
        log = self.read("serve.out")
        self.assertRegex(log, r"idle for \d+ s: exiting")
        self.assertFalse(os.path.exists(os.path.join(self.run_dir, "serve.pid")))
        self.assertIsNone(self.try_status())

    def test_status_watch_refreshes(self):
        """`status --watch` redraws the human status (clear screen first) until
        interrupted, and a later frame shows a request made after the first."""
        service = self.start_service()
        watch = subprocess.Popen([CCPOOL, "status", "--watch", "--socket", self.sock], env=self.env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.clients.append(watch)
        seen = bytearray()
        lock = threading.Lock()

        def pump():
            for chunk in iter(lambda: watch.stdout.read1(4096), b""):
                with lock:
                    seen.extend(chunk)
        reader = threading.Thread(target=pump, daemon=True)
        reader.start()

        def frames():
            with lock:
                data = bytes(seen)
            if watch.poll() is not None:
                raise AssertionError(f"status --watch exited {watch.returncode} after printing {data!r}")
            # Complete frames only: each one is followed by the next clear.
            return [f.decode() for f in data.split(CLEAR)[1:-1]]
        first = wait_until(frames, "the first status frame")[0]
        self.assertIn(f"service    pid {service.pid} on {self.sock}", first)
        self.assertIn("requests   0:", first)
        rc, out, _ = self.run_exec(["/bin/echo", "one request"])
        self.assertEqual((rc, out), (0, b"one request\n"))
        wait_until(lambda: any("requests   1:" in f for f in frames()), "a frame counting the request")
        shown = frames()
        watch.send_signal(signal.SIGINT)
        watch.wait(HANG_GUARD_S)
        reader.join(HANG_GUARD_S)
        self.assertEqual(watch.returncode, -signal.SIGINT)
        for f in shown:
            self.assertTrue(f.startswith("service    pid "), f)
        self.assertEqual(watch.stderr.read(), b"")

    def test_log_rotation(self):
        """ccpool.log rotates at 10 MiB into ccpool.1.log .. ccpool.3.log; the
        oldest is dropped. A log already at the limit rotates on the first line."""
        os.makedirs(self.run_dir, mode=0o700)
        log = os.path.join(self.run_dir, "ccpool.log")
        with open(log, "wb") as f:
            f.write((b"x" * 1023 + b"\n") * (LOG_MAX // 1024))
        for n, text in ((1, "one\n"), (2, "two\n"), (3, "three\n")):
            self.write(f"run/ccpool.{n}.log", text, 0o600)
        service = self.start_service()
        self.run_exec(["/bin/true"])
        r = subprocess.run([CCPOOL, "stop", "--socket", self.sock], env=self.env,
                           capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(service.wait(HANG_GUARD_S), 0)
        self.assertEqual(os.path.getsize(os.path.join(self.run_dir, "ccpool.1.log")), LOG_MAX)
        self.assertEqual(self.read("run/ccpool.2.log"), "one\n")
        self.assertEqual(self.read("run/ccpool.3.log"), "two\n")
        self.assertFalse(os.path.exists(os.path.join(self.run_dir, "ccpool.4.log")))
        current = self.read("run/ccpool.log")
        self.assertLess(len(current), 1 << 20)
        self.assertNotIn("xxxx", current)
        self.assertIn(self.sock, current, "the new log holds this instance's lines")

    def test_status_instance_keys(self):
        """The `status --json` keys that describe the instance: pid, socket,
        store_dir, uptime_s, remote, hit_service_us (docs/service.md)."""
        service = self.start_service()
        s = self.status()
        self.assertEqual(s["pid"], service.pid)
        self.assertEqual(s["socket"], self.sock)
        self.assertEqual(os.path.realpath(s["store_dir"]), os.path.realpath(self.store))
        self.assertIs(s["remote"], False)
        self.assertIsInstance(s["uptime_s"], int)
        self.assertGreaterEqual(s["uptime_s"], 0)
        self.assertEqual(s["hit_service_us"], 0)
        self.write("work/in.txt", "a")
        tool = self.write("work/declared.sh", DECLARED_TOOL, 0o755)
        for _ in range(2):
            rc, _, err = self.run_exec(["/bin/sh", tool], inputs=["in.txt"], outputs=["out.txt"])
            self.assertEqual(rc, 0, err)
        later = self.status()
        self.assertEqual((later["hits"], later["misses"]), (1, 1))
        self.assertGreater(later["hit_service_us"], 0)
        self.assertGreaterEqual(later["uptime_s"], s["uptime_s"])
        self.assertEqual((later["pid"], later["socket"], later["store_dir"]),
                         (s["pid"], s["socket"], s["store_dir"]))


if __name__ == "__main__":
    main()
