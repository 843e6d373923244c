"""Node service, pool side: bound, pass-through, admission, fairness (issue 3).

Real processes: `ccpool serve --foreground` on a private socket and many
concurrent `ccpool exec` clients. Tools record what they saw (concurrency,
start order) in files under the test directory; the tests assert those
records and the service's counters, never durations.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
from harness import CCPOOL, ServiceCase, main, wait_until  # noqa: E402

# Records its own concurrency: under an flock, bump cur, log the level, and
# log its label in start order; optionally waits for a gate file; then leaves.
# $1 = record dir, $2 = label, $3 = gate file ("" = none), $4 = sleep seconds.
CONC_TOOL = r"""#!/bin/sh
d="$1"
(
  flock 9
  n=$(cat "$d/cur" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$d/cur"
  echo $n >> "$d/levels"
  echo "$2" >> "$d/starts"
) 9>"$d/lock"
if [ -n "$3" ]; then
  i=0
  while [ ! -e "$3" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done
fi
sleep "${4:-0}"
(
  flock 9
  n=$(cat "$d/cur"); echo $((n-1)) > "$d/cur"
  echo "$2" >> "$d/ends"
) 9>"$d/lock"
echo "done $2"
"""

# Allocates and touches ~100 MiB, so its measured peak RSS exceeds a 64 MiB
# budget; records its concurrency like CONC_TOOL. $1 = record dir, $2 = label,
# $3 = gate file to wait for while holding the memory (optional).
ALLOC_TOOL = r"""
import fcntl, os, sys, time
d = sys.argv[1]
gate = sys.argv[3] if len(sys.argv) > 3 else ""
def bump(delta):
    with open(os.path.join(d, "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            cur = int(open(os.path.join(d, "cur")).read())
        except FileNotFoundError:
            cur = 0
        cur += delta
        open(os.path.join(d, "cur"), "w").write(str(cur))
        if delta > 0:
            open(os.path.join(d, "levels"), "a").write(f"{cur}\n")
bump(1)
x = b"\x01" * (100 << 20)
time.sleep(0.3)
for _ in range(1200):
    if not gate or os.path.exists(gate):
        break
    time.sleep(0.05)
bump(-1)
print("allocated", len(x) >> 20)
"""


class ServicePoolTest(ServiceCase):
    def conc_tool(self):
        self.rec = self.path("rec")
        os.makedirs(self.rec)
        return self.write("conc.sh", CONC_TOOL, 0o755)

    def levels(self):
        return [int(x) for x in self.lines("rec/levels")]

    def test_bound(self):
        """64 concurrent distinct requests with --jobs 2 never run more than 2 at once."""
        tool = self.conc_tool()
        self.start_service(jobs=2)
        procs = [self.spawn(["/bin/sh", tool, self.rec, str(i), "", "0.1"]) for i in range(64)]
        results = self.finish(procs)
        for i, (rc, out, err) in enumerate(results):
            self.assertEqual((rc, out, err), (0, f"done {i}\n".encode(), b""), f"client {i}")
        s = self.status()
        self.assertEqual(s["jobs"], 2)
        self.assertLessEqual(s["peak_running"], 2)
        self.assertGreaterEqual(s["peak_running"], 1)
        self.assertEqual(s["executions"], 64)
        self.assertEqual(s["requests"], 64)
        self.assertEqual(s["running"], 0)
        self.assertEqual(s["queued"], 0)
        levels = self.levels()
        self.assertEqual(len(levels), 64)
        self.assertLessEqual(max(levels), 2, "the tool saw more than --jobs copies of itself")
        self.assertGreaterEqual(min(levels), 1)
        self.assertEqual(sorted(self.lines("rec/ends")), sorted(str(i) for i in range(64)))

    def test_passthrough_bound_and_never_cached(self):
        """Pass-through requests count against the bound and are never cached."""
        tool = self.conc_tool()
        self.start_service(jobs=2)
        procs = [self.spawn(["/bin/sh", tool, self.rec, f"p{i}", "", "0.05"]) for i in range(16)]
        for i, (rc, out, _) in enumerate(self.finish(procs)):
            self.assertEqual((rc, out), (0, f"done p{i}\n".encode()))
        s = self.status()
        self.assertEqual(s["passthrough"], 16)
        self.assertEqual(s["executions"], 16)
        self.assertLessEqual(s["peak_running"], 2)
        self.assertLessEqual(max(self.levels()), 2)
        self.assertEqual((s["hits"], s["misses"], s["joins"]), (0, 0, 0))
        # The identical request again runs the tool again.
        rc, out, _ = self.run_exec(["/bin/sh", tool, self.rec, "p0", "", "0"])
        self.assertEqual((rc, out), (0, b"done p0\n"))
        s = self.status()
        self.assertEqual((s["passthrough"], s["executions"], s["hits"]), (17, 17, 0))
        self.assertEqual(len(self.lines("rec/starts")), 17)

    def test_admission_learns_and_serializes(self):
        """With --mem-budget 64M and --jobs 4, a class measured at ~100 MiB runs
        one at a time after its first measured peak, and every job finishes."""
        rec = self.path("rec")
        os.makedirs(rec)
        tool = self.write("alloc.py", ALLOC_TOOL)
        self.start_service("--mem-budget", "64M", jobs=4)
        self.assertEqual(self.status()["mem_budget"], 64 << 20)
        # Wave 1: one job, so the service measures the class's peak.
        rc, out, err = self.run_exec(["/usr/bin/python3", tool, rec, "w1"])
        self.assertEqual((rc, out), (0, b"allocated 100\n"), err)
        os.remove(os.path.join(rec, "levels"))
        # Wave 2: 8 concurrent jobs of the same class.
        procs = [self.spawn(["/usr/bin/python3", tool, rec, f"w2-{i}"]) for i in range(8)]
        for rc, out, err in self.finish(procs):
            self.assertEqual((rc, out), (0, b"allocated 100\n"), err)
        levels = self.levels()
        self.assertEqual(len(levels), 8, "every job of wave 2 ran (no starvation)")
        self.assertEqual(max(levels), 1, "jobs over the memory budget ran concurrently")
        s = self.status()
        self.assertEqual(s["executions"], 9)
        self.assertEqual(s["peak_running"], 1)
        self.assertEqual((s["running"], s["queued"]), (0, 0))

    def test_admission_packs_by_learned_estimate(self):
        """--mem-budget 600M, --jobs 8: before its first measured peak a class is
        charged the 512 MiB default, so only one such job would fit. Once the
        ~100 MiB peak is learned, as many gated jobs run as that estimate fits
        in the budget, and no more."""
        rec = self.path("rec")
        os.makedirs(rec)
        tool = self.write("alloc.py", ALLOC_TOOL)
        gate = self.path("gate")
        budget = 600 << 20
        self.start_service("--mem-budget", "600M", jobs=8)
        self.assertEqual(self.status()["mem_budget"], budget)
        rc, out, err = self.run_exec(["/usr/bin/python3", tool, rec, "w1"])
        self.assertEqual((rc, out), (0, b"allocated 100\n"), err)
        os.remove(os.path.join(rec, "levels"))
        procs = [self.spawn(["/usr/bin/python3", tool, rec, f"w2-{i}", gate]) for i in range(8)]
        # Admission happens when a request arrives; gated jobs free nothing, so
        # once all 8 are running or queued the split is final.
        s = self.wait_status(lambda s: s["requests"] == 9 and s["running"] + s["queued"] == 8,
                             "the 8 gated requests to be running or queued")
        running, reserved = s["running"], s["mem_reserved"]
        self.assertGreaterEqual(running, 1)
        self.assertEqual(reserved % running, 0, "running jobs of one class carry one estimate")
        estimate = reserved // running
        self.assertGreaterEqual(estimate, 100 << 20, "the estimate is below the measured peak")
        self.assertLess(estimate, 512 << 20,
                        f"running={running} reserved={reserved}: the class is still charged the "
                        "512 MiB default, its measured peak was not learned")
        self.assertLessEqual(running * estimate, budget)
        self.assertTrue(running == 8 or (running + 1) * estimate > budget,
                        f"{running} running with an estimate of {estimate} leaves room in {budget}")
        self.assertGreaterEqual(running, 2)
        open(gate, "w").close()
        for rc, out, err in self.finish(procs):
            self.assertEqual((rc, out), (0, b"allocated 100\n"), err)
        levels = self.levels()
        self.assertEqual(len(levels), 8)
        self.assertLessEqual(max(levels), running, "more jobs ran than the learned estimate fits")
        s = self.status()
        self.assertEqual(s["peak_running"], running)
        self.assertEqual((s["running"], s["queued"], s["mem_reserved"]), (0, 0, 0))

    def fairness(self, b_env, launch_a):
        """A queues 50 jobs behind a gated first one (--jobs 1), then B sends
        one. Returns B's position in the start order."""
        tool = self.conc_tool()
        gate = self.path("gate")
        self.start_service(jobs=1)
        launch_a(tool, gate)
        self.wait_status(lambda s: s["requests"] == 50 and s["running"] == 1 and s["queued"] == 49,
                         "A's 50 requests (1 running, 49 queued)")
        b = self.spawn(["/bin/sh", tool, self.rec, "B", gate], env=b_env)
        self.wait_status(lambda s: s["requests"] == 51 and s["queued"] == 50, "B's request queued")
        open(gate, "w").close()
        rc, out, _ = self.finish([b])[0]
        self.assertEqual((rc, out), (0, b"done B\n"))
        wait_until(lambda: len(self.lines("rec/ends")) == 51, "A's queue to drain")
        starts = self.lines("rec/starts")
        self.assertEqual(len(starts), 51)
        self.assertEqual(max(self.levels()), 1)
        return starts.index("B")

    def test_fairness_by_rank(self):
        """Buckets by RANK: B's first job starts right after A's running one."""
        def launch_a(tool, gate):
            self.a = [self.spawn(["/bin/sh", tool, self.rec, f"A{i}", gate], env={"RANK": "0"})
                      for i in range(50)]
        pos = self.fairness({"RANK": "1"}, launch_a)
        self.assertLessEqual(pos, 2, f"B started {pos}th of 51: behind A's queue")
        for rc, _, _ in self.finish(self.a):
            self.assertEqual(rc, 0)

    def test_fairness_by_parent(self):
        """Without RANK, buckets by the client's parent: A's 50 requests come
        from one shell, B's from the test process."""
        def launch_a(tool, gate):
            loop = (f'for i in $(seq 0 49); do "$0" exec --socket "$1" -- /bin/sh "$2" "$3" A$i "$4" & '
                    'done; wait')
            self.shell = subprocess.Popen(["/bin/sh", "-c", loop, CCPOOL, self.sock,
                                           tool, self.rec, gate], env=self.env,
                                          stdout=subprocess.DEVNULL)
            self.clients.append(self.shell)
        pos = self.fairness({}, launch_a)
        self.assertLessEqual(pos, 2, f"B started {pos}th of 51: behind A's queue")
        self.assertEqual(self.shell.wait(60), 0)

    def test_ccpool_client_argv_contract(self):
        """`ccpool-client <program> <argv0> <args...>` (what the shim execs)
        runs through the pool with argv[0] preserved."""
        self.start_service(jobs=2)
        client = os.path.join(os.path.dirname(CCPOOL), "ccpool-client")
        script = 'tr "\\0" " " < /proc/$$/cmdline; echo "$0"; exit 5'
        r = subprocess.run([client, "/bin/sh", "custom-name", "-c", script, "arg1"],
                           env=self.env, cwd=self.work, capture_output=True, timeout=90)
        self.assertEqual((r.returncode, r.stdout, r.stderr),
                         (5, f"custom-name -c {script} arg1 arg1\n".encode(), b""))
        s = self.status()
        self.assertEqual((s["requests"], s["executions"], s["passthrough"]), (1, 1, 1))


if __name__ == "__main__":
    main()
