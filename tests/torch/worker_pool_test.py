"""Issue 24: Inductor's compile workers in one node pool, each kernel compiled
once per node. Real torch 2.13 and triton 3.7.1 on CPU: the ranks call
Inductor's own AsyncCompile.triton with the fixture kernels for their own GPU
index (support/inductor_ranks.py; tests/torch/fixtures/triton/README.md says
how the worker path runs without a GPU), and real ptxas builds the cubins.

Ground truth, independent of the service's counters: the processes on the
node (ProcessWatch over the job and the service), the cubin compiles that
really ran (support/bin/ptxas logs each one), and what each rank's worker
result holds (its own device index, an sm_90a cubin that names the kernel).
Counts, never seconds.
"""
import glob
import json
import os
import shutil
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
from torch_case import (CCPOOL, HERE, VENV_PY, TorchCase, cmdline, descendants, main, pid_gone,  # noqa: E402
                        proc_name, serve_pids, wait_until)

JOBS = 2
KERNELS = ("triton_per_fused__softmax_0", "triton_poi_fused_add_relu_0", "triton_red_fused_sum_0")
CONFIGS = 4  # add_relu has two autotuning configs, the others one
RANKS_SCRIPT = os.path.join(HERE, "inductor_ranks.py")
PTXAS = "/usr/local/cuda/bin/ptxas"


class WorkerPoolCase(TorchCase):
    def setUp(self):
        super().setUp()
        if not os.access(PTXAS, os.X_OK):
            self.skipTest(f"{PTXAS} is missing (the CUDA toolkit); the worker-pool cases need a real ptxas")
        self.ptxas_log = self.path("ptxas.log")
        self.env.update(NOGPU_COMPILE_SHIM="1", TORCHINDUCTOR_COMPILE_THREADS="32",
                        TRITON_PTXAS_PATH=os.path.join(HERE, "bin", "ptxas"), TEST_PTXAS_LOG=self.ptxas_log,
                        TEST_REAL_PTXAS=PTXAS)
        self.env.pop("TRITON_CACHE_DIR", None)  # Inductor's default: one directory per device index

    def ptxas_compiles(self):
        try:
            with open(self.ptxas_log) as f:
                return sum(1 for line in f if " -o " in f" {line}")
        except FileNotFoundError:
            return 0

    def torchrun(self, ranks, out, flags=(), env=None, script_args=()):
        return self.ccpool_run(VENV_PY, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                               str(ranks), RANKS_SCRIPT, "--out-dir", out, *script_args, jobs=JOBS, flags=flags,
                               env=env)

    def one_rank(self, rank, out, env=None):
        return self.ccpool_run(VENV_PY, RANKS_SCRIPT, "--out-dir", out, jobs=JOBS,
                               env={"LOCAL_RANK": str(rank), **(env or {})})

    def results(self, out, ranks):
        found = {}
        for r in ranks:
            with open(os.path.join(out, f"rank{r}.json")) as f:
                found[r] = json.load(f)
        return found

    def check_rank(self, result, rank, pool="ccpool._pool.NodePool"):
        """What the rank's parent would load: its own device, a cubin per config."""
        self.assertEqual(result["pool"], pool, result)
        self.assertEqual(sorted(result["kernels"]), sorted(KERNELS))
        configs = 0
        for name, k in result["kernels"].items():
            self.assertEqual(k["device_index"], rank, (name, k))
            self.assertEqual(k["cc"], 90, (name, k))
            for c in k["configs"]:
                self.assertTrue(c["is_elf"] and c["names_kernel"] and c["matches_file"], (name, c))
            configs += len(k["configs"])
        self.assertEqual(configs, CONFIGS)

    def pool_status(self):
        return self.status()["worker_pool"]

    def gate(self):
        gate = self.path("gate")
        os.makedirs(gate, exist_ok=True)
        return gate

    def running_workers(self, gate):
        return [int(p.rsplit(".", 1)[1]) for p in glob.glob(os.path.join(gate, "running.*"))]


class WorkerPoolTest(WorkerPoolCase):
    def test_each_kernel_compiles_once(self):
        """4 ranks x TORCHINDUCTOR_COMPILE_THREADS=32 (plain torchrun: 132
        Python compile processes, 16 ptxas; see the control below): at most
        jobs + 1 Python compile processes on the node (the workers and their
        zygote), 4 cubin compiles (3
        kernels, 4 configs), every rank's own results. Then a fresh node
        (Inductor's cache emptied, the ccpool store kept) compiles nothing."""
        ranks = 4
        out = self.wpath("out")
        job = self.torchrun(ranks, out)
        self.watch_job(job)
        self.run_ok(job)
        self.watch.stop()
        for r, result in self.results(out, range(ranks)).items():
            self.check_rank(result, r)
        s = self.pool_status()
        detail = (f"worker pool {s}; peak python compile processes {self.watch.peak_python_workers}: "
                  f"{self.watch.python_workers_seen}")
        self.assertLessEqual(self.watch.peak_python_workers, JOBS + 1, detail)
        self.assertLessEqual(s["peak_workers"], JOBS, detail)
        self.assertEqual(self.ptxas_compiles(), CONFIGS, detail)
        # Every kernel of every rank (readiness probes run no job).
        self.assertEqual(s["jobs"], ranks * len(KERNELS), detail)
        self.assertEqual(s["counts"]["triton_compiles"], CONFIGS, detail)
        self.assertEqual((s["failed"], s["cancelled"], s["busy"]), (0, 0, 0), detail)
        # Every worker is a fork of the one environment's zygote, set up once.
        self.assertEqual(s["zygotes_started"], 1, detail)
        self.assertEqual(s["forked"], s["spawned"], detail)
        print(f"{ranks} ranks: {detail}; ptxas {self.ptxas_compiles()}", file=sys.stderr)
        human = subprocess.run([CCPOOL, "status", "--socket", self.sock], env=self.env, capture_output=True,
                               text=True, timeout=60).stdout
        self.assertIn("2 Inductor compile workers", human)
        self.assertIn("Triton kernels: 4 compiled", human)

        shutil.rmtree(self.path("inductor"))
        again = self.wpath("again")
        self.run_ok(self.torchrun(ranks, again))
        for r, result in self.results(again, range(ranks)).items():
            self.check_rank(result, r)
        s2 = self.pool_status()
        self.assertEqual(self.ptxas_compiles(), CONFIGS, f"a fresh node ran ptxas: {s2}")
        self.assertEqual(s2["counts"]["triton_compiles"], CONFIGS, s2)
        self.assertEqual(s2["counts"]["triton_store_hits"] - s["counts"]["triton_store_hits"], ranks * CONFIGS, s2)

    def test_control_without_hooks(self):
        """The control (`--no-python-hooks`: each rank keeps Inductor's own
        sidecar and workers, capped by the shim): 2 ranks compile 2 x 4
        cubins (the PTX names the rank's kernel file, so even the service's
        ptxas cache misses) in more than jobs + 1 Python compile processes.
        Each rank holds its pool (sidecar and workers) after submitting until
        the watch has seen more than jobs + 1 of them, or 300 s have passed:
        on a loaded machine one rank could otherwise finish before the other
        starts its pool, and the peak would be one rank's (a CI run saw 3)."""
        ranks = 2
        out = self.wpath("out")
        hold = self.path("hold")
        job = self.torchrun(ranks, out, flags=("--no-python-hooks",), script_args=("--hold-file", hold))
        self.watch_job(job)
        try:
            wait_until(lambda: self.watch.peak_python_workers > JOBS + 1 or job.poll() is not None,
                       "both ranks' Python compile processes", timeout=300)
        except AssertionError:
            pass  # the assertion below names the peak that was seen
        with open(hold, "w"):
            pass
        self.run_ok(job)
        self.watch.stop()
        for r, result in self.results(out, range(ranks)).items():
            self.check_rank(result, r, pool="torch._inductor.compile_worker.subproc_pool.SubprocPool")
        self.assertEqual(self.ptxas_compiles(), ranks * CONFIGS)
        self.assertGreater(self.watch.peak_python_workers, JOBS + 1)
        self.assertEqual(self.pool_status()["jobs"], 0)

    def test_killed_rank_leaves_no_job(self):
        """Rank 0's compiles are running (held at a gate) and rank 1's wait to
        follow them; rank 0 is SIGKILLed: the workers running its jobs are
        killed with them, rank 1 leads instead and gets all its results."""
        gate = self.gate()
        victim = self.one_rank(0, self.wpath("r0"), env={"TEST_WORKER_GATE": gate})
        wait_until(lambda: self.running_workers(gate) or victim.poll() is not None,
                   "rank 0's compiles to run", timeout=300)
        self.assertIsNone(victim.poll())
        busy_workers = self.running_workers(gate)
        other = self.one_rank(1, self.wpath("r1"), env={"TEST_WORKER_GATE": gate})
        self.wait_status(lambda s: s["worker_pool"]["following"] >= 1, "rank 1's jobs to follow rank 0's")
        rank0 = [p for p in descendants(victim.pid) if (proc_name(p) or "").startswith("python")]
        self.assertEqual(len(rank0), 1, rank0)
        os.kill(rank0[0], signal.SIGKILL)
        for pid in busy_workers:
            wait_until(lambda: pid_gone(pid), f"worker {pid} running rank 0's job to be killed", timeout=60)
        open(os.path.join(gate, "go"), "w").close()
        self.run_ok(other)
        self.check_rank(self.results(self.wpath("r1"), [1])[1], 1)
        s = self.pool_status()
        self.assertGreaterEqual(s["cancelled"], 1, s)
        self.assertGreaterEqual(s["killed"], len(busy_workers), s)
        self.assertEqual((s["busy"], s["following"], s["failed"]), (0, 0, 0), s)
        self.finish_run(victim)

    def test_ctrl_c_ends_its_compiles(self):
        """SIGINT to `ccpool run` while the ranks' compiles run: nothing of the
        job is left, and the service's workers that ran its jobs are killed
        (the pool keeps no job of a job that is gone)."""
        gate = self.gate()
        job = self.torchrun(2, self.wpath("out"), flags=("--grace", "2s"), env={"TEST_WORKER_GATE": gate})
        watch = self.watch_job(job)
        wait_until(lambda: self.running_workers(gate) or job.poll() is not None, "a compile to run", timeout=300)
        busy_workers = self.running_workers(gate)
        job.send_signal(signal.SIGINT)
        self.finish_run(job, guard=120)
        watch.stop()
        service = set(serve_pids(self.sock))
        left = [(p, n) for p, n in watch.seen.items()
                if not pid_gone(p) and p not in service and "ccpool._worker" not in " ".join(cmdline(p))]
        self.assertEqual(left, [], "processes of the job left after Ctrl-C")
        for pid in busy_workers:
            # Reaped, not only dead: the service's thread of a worker reaps it once
            # it has seen the worker's channel close (a zombie child of the
            # service is not gone; a thread stuck before the reap shows here).
            wait_until(lambda: all(pid_gone(pid, s) for s in service),
                       f"worker {pid} running a job of the interrupted job to be killed and reaped", timeout=60)
        try:
            self.wait_status(lambda s: s["worker_pool"]["busy"] == 0, "the pool to be idle")
        except AssertionError as e:  # seen once under load: name what is still busy
            # The service logs each closed session's jobs and what each was doing
            # (running in which worker pid, queued, following which job).
            sessions = [line for line in self.service_log().splitlines() if "pool session" in line]
            raise AssertionError(f"{e}; busy workers {busy_workers}; worker pool: {self.pool_status()}; "
                                 f"service log:\n" + "\n".join(sessions[-20:])) from e

    def test_fallback_without_service(self):
        """The hooks are on but no service answers: Inductor's own pool
        compiles, exactly as without ccpool."""
        out = self.wpath("out")
        job = self.ccpool_run(VENV_PY, RANKS_SCRIPT, "--out-dir", out, jobs=JOBS,
                              env={"LOCAL_RANK": "0", "CCPOOL_RUN_NO_SERVICE": "1"})
        _, err = self.run_ok(job)
        self.check_rank(self.results(out, [0])[0], 0, pool="torch._inductor.compile_worker.subproc_pool.SubprocPool")
        self.assertIn("the node pool is not reachable", err)
        self.assertEqual(self.ptxas_compiles(), CONFIGS)


if __name__ == "__main__":
    main()
