"""Node service, single-flight and cache side (issue 3).

16 concurrent identical declared requests must share one execution. The tool
waits on a gate file that the test creates only once the service reports all
16 requests (1 miss + 15 joins), so the test does not depend on timing.
"""
import os
import signal
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
from harness import ServiceCase, main, pid_gone, wait_until  # noqa: E402

# A declared job: reads in.txt, writes out.txt. Records each run's pid (and
# its background child's, to check the process group is killed) in runs/.
# $1 = mode (ok | fail), $2 = gate file.
FLIGHT_TOOL = r"""#!/bin/sh
sleep 300 >/dev/null 2>&1 &
echo "$$ $!" > "runs/$$"
i=0
while [ ! -e "$2" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done
kill $! 2>/dev/null
if [ "$1" = fail ]; then
  echo "boom: cannot frobnicate $(cat in.txt)" >&2
  exit 3
fi
printf 'result of %s\n' "$(cat in.txt)" > out.txt
echo "stdout of the tool"
echo "stderr of the tool" >&2
"""

N = 16


class ServiceFlightTest(ServiceCase):
    def setUp(self):
        super().setUp()
        self.tool = self.write("work/tool.sh", FLIGHT_TOOL, 0o755)
        self.gate = self.path("gate")
        self.runs = os.path.join(self.work, "runs")
        os.makedirs(self.runs)
        self.pid_files.append(self.runs)
        self.write("work/in.txt", "input-1")

    def request(self, mode="ok"):
        return self.spawn(["/bin/sh", "tool.sh", mode, self.gate], inputs=["in.txt"],
                          outputs=["out.txt"])

    def runs_count(self):
        return len(os.listdir(self.runs))

    def start_identical(self, mode="ok"):
        procs = [self.request(mode) for _ in range(N)]
        self.wait_status(lambda s: s["requests"] == N and s["joins"] == N - 1,
                         f"{N} requests, {N - 1} of them joined")
        return procs

    def test_single_flight(self):
        self.start_service(jobs=4)
        procs = self.start_identical()
        open(self.gate, "w").close()
        results = self.finish(procs)
        for rc, out, err in results:
            self.assertEqual((rc, out, err), (0, b"stdout of the tool\n", b"stderr of the tool\n"))
        self.assertEqual(self.read("work/out.txt"), "result of input-1\n")
        s = self.status()
        self.assertEqual((s["executions"], s["misses"], s["joins"], s["hits"]), (1, 1, N - 1, 0))
        self.assertEqual(s["failures"], 0)
        self.assertEqual(self.runs_count(), 1)

    def test_single_flight_failure_shared_not_cached(self):
        self.start_service(jobs=4)
        procs = self.start_identical("fail")
        open(self.gate, "w").close()
        for rc, out, err in self.finish(procs):
            self.assertEqual((rc, out, err), (3, b"", b"boom: cannot frobnicate input-1\n"))
        s = self.status()
        self.assertEqual((s["executions"], s["failures"], s["joins"]), (1, 1, N - 1))
        # A failure is never stored: the same request executes again.
        rc, _, err = self.finish([self.request("fail")])[0]
        self.assertEqual((rc, err), (3, b"boom: cannot frobnicate input-1\n"))
        s = self.status()
        self.assertEqual((s["executions"], s["hits"], s["failures"]), (2, 0, 2))
        self.assertEqual(self.runs_count(), 2)

    def test_leader_disconnect_job_continues(self):
        self.start_service(jobs=4)
        procs = self.start_identical()
        s = self.wait_status(lambda s: len(s["running_jobs"]) == 1, "the job to run")
        leader = s["running_jobs"][0]["client_pid"]
        by_pid = {p.pid: p for p in procs}
        self.assertIn(leader, by_pid, "running_jobs[0].client_pid is not one of the clients")
        clients = s["clients"]  # includes the status client itself
        by_pid[leader].send_signal(signal.SIGKILL)
        by_pid[leader].wait(30)
        self.wait_status(lambda s: s["clients"] == clients - 1, "the service to see the disconnect")
        open(self.gate, "w").close()
        rest = [p for p in procs if p.pid != leader]
        for rc, out, err in self.finish(rest):
            self.assertEqual((rc, out, err), (0, b"stdout of the tool\n", b"stderr of the tool\n"))
        self.assertEqual(self.read("work/out.txt"), "result of input-1\n")
        s = self.status()
        self.assertEqual((s["executions"], s["cancelled"]), (1, 0))
        self.assertEqual(self.runs_count(), 1)

    def test_all_disconnect_cancels(self):
        service = self.start_service(jobs=4)
        procs = self.start_identical()
        wait_until(lambda: self.runs_count() == 1, "the tool to record its pid")
        pids = self.recorded_pids()
        self.assertEqual(len(pids), 2)  # the tool and its background child
        for p in procs:
            p.send_signal(signal.SIGKILL)
        for p in procs:
            p.wait(30)
        s = self.wait_status(lambda s: s["cancelled"] >= 1, "the job to be cancelled")
        for pid in pids:
            wait_until(lambda: pid_gone(pid, service.pid), f"process {pid} of the cancelled job to die")
        s = self.wait_status(lambda s: s["running"] == 0 and not s["running_jobs"], "no running job")
        self.assertEqual((s["executions"], s["cancelled"]), (1, 1))
        self.assertFalse(os.path.exists(os.path.join(self.work, "out.txt")))
        # Nothing was stored: the request executes again (and completes).
        open(self.gate, "w").close()
        rc, out, _ = self.finish([self.request()])[0]
        self.assertEqual((rc, out), (0, b"stdout of the tool\n"))
        self.assertEqual(self.status()["executions"], 2)

    def test_cache_hit_and_input_change(self):
        self.start_service(jobs=2)
        open(self.gate, "w").close()
        rc, out, err = self.finish([self.request()])[0]
        self.assertEqual((rc, out, err), (0, b"stdout of the tool\n", b"stderr of the tool\n"))
        s = self.status()
        self.assertEqual((s["executions"], s["misses"], s["hits"]), (1, 1, 0))
        # Same request: a hit; the output is rewritten from the store.
        os.remove(os.path.join(self.work, "out.txt"))
        rc, out, err = self.finish([self.request()])[0]
        self.assertEqual((rc, out, err), (0, b"stdout of the tool\n", b"stderr of the tool\n"))
        self.assertEqual(self.read("work/out.txt"), "result of input-1\n")
        s = self.status()
        self.assertEqual((s["executions"], s["misses"], s["hits"]), (1, 1, 1))
        self.assertEqual(self.runs_count(), 1)
        # A changed declared input misses and runs the tool.
        self.write("work/in.txt", "input-2")
        rc, out, _ = self.finish([self.request()])[0]
        self.assertEqual((rc, out), (0, b"stdout of the tool\n"))
        self.assertEqual(self.read("work/out.txt"), "result of input-2\n")
        s = self.status()
        self.assertEqual((s["executions"], s["misses"], s["hits"]), (2, 2, 1))
        self.assertEqual(self.runs_count(), 2)

    def test_cache_key_covers_cwd_and_keeps_mode(self):
        """The same command in another cwd misses; a hit restores the mode."""
        self.start_service(jobs=2)
        open(self.gate, "w").close()
        self.assertEqual(self.finish([self.request()])[0][0], 0)
        os.remove(os.path.join(self.work, "out.txt"))
        self.assertEqual(self.finish([self.request()])[0][0], 0)
        self.assertEqual(self.status()["hits"], 1)
        self.assertEqual(os.stat(os.path.join(self.work, "out.txt")).st_mode & 0o777, 0o644)
        other = self.path("work2")
        os.makedirs(os.path.join(other, "runs"))
        for name in ("tool.sh", "in.txt"):
            with open(os.path.join(self.work, name)) as f:
                self.write(os.path.join("work2", name), f.read(), 0o755)
        rc, out, _ = self.finish([self.spawn(["/bin/sh", "tool.sh", "ok", self.gate],
                                             inputs=["in.txt"], outputs=["out.txt"], cwd=other)])[0]
        self.assertEqual((rc, out), (0, b"stdout of the tool\n"))
        s = self.status()
        self.assertEqual((s["executions"], s["hits"], s["misses"]), (2, 1, 2))
        self.assertEqual(self.read("work2/out.txt"), "result of input-1\n")


if __name__ == "__main__":
    main()
