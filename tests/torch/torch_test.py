"""Issue 14: real torch.compile (Inductor's CPU backend, g++) and torchrun
under `ccpool run`, checked against eager and against the service's and the
job's own view of what ran. See support/torch_case.py for the set-up.

Counts, never seconds: executions, misses, hits, the bound on concurrent
compilers, the processes left after Ctrl-C.
"""
import os
import shutil
import signal
import socket
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
from slurm_cluster import SlurmCluster  # noqa: E402
from torch_case import (CCPOOL, HERE, MODEL, VENV_PY, TorchCase, main, pid_gone, proc_name,  # noqa: E402
                        serve_pids, wait_until)

JOBS = 2
PIECES = ("mlp", "norm", "reduce")


def build_key(e):
    return (e["cwd"], tuple(e["argv"]))


class ModelCase(TorchCase):
    def check_ranks(self, out_dir, ranks, jobs=JOBS, hooks=True):
        results = self.model_results(out_dir, ranks)
        # ccpool run sets the compile threads before the interpreter starts,
        # and Inductor takes them: max(2, jobs) with the Python hooks (the
        # node pool bounds the work), the fair share without them.
        share = str(max(2, jobs) if hooks else max(1, jobs // ranks))
        for r in results:
            self.assertEqual(r["ok"], {p: True for p in PIECES}, r)
            self.assertTrue(r["ranks_agree"], r)
            self.assertEqual(r["env_compile_threads"], share, r)
            self.assertEqual(r["compile_threads"], int(share), r)
        return results



class TorchRunTest(ModelCase):
    def torchrun(self, ranks, out_dir, jobs=JOBS, flags=(), env=None):
        return self.ccpool_run(VENV_PY, "-m", "torch.distributed.run", "--standalone",
                               "--nproc-per-node", str(ranks), MODEL, "--out-dir", out_dir,
                               jobs=jobs, flags=flags, env=env)

    def check_builds(self, ranks):
        """Every compile went through the service; each distinct build ran
        exactly once; probes (--version, -v, -E) pass through."""
        s = self.status_summary()
        compiles = self.compiler_execs()
        builds = [e for e in compiles if not self.is_probe(e["argv"])]
        probes = [e for e in compiles if self.is_probe(e["argv"])]
        distinct = {build_key(e) for e in builds}
        detail = f"status {s}; {len(builds)} builds ({len(distinct)} distinct), " \
                 f"{len(probes)} probes; not stored: {self.not_stored_reasons()}"
        self.assertEqual(s["requests"], len(compiles), detail)
        self.assertEqual((s["fallbacks"], s["failures"]), (0, 0), detail)
        # One execution per distinct build (never ranks x kernels), within the bound.
        self.assertEqual(s["executions"], len(distinct) + len(probes), detail)
        self.assertLessEqual(s["peak_running"], JOBS, detail)
        self.assertLessEqual(self.watch.peak_compilers, JOBS, detail)
        # Every build is cacheable and stored: only the probes pass through.
        # (The .gch build passes through and kernels reaching bit_cast.h's
        # __has_include are not stored until issues [1 of 6] and [3 of 6].)
        self.assertEqual(s["passthrough"], len(probes), "a build passed through: " + detail)
        self.assertEqual(s["not_stored"], 0, "a build was not stored: " + detail)
        self.assertEqual(s["misses"], len(distinct), detail)
        return s, distinct

    def test_ranks_share_default_cache_dir(self):
        ranks = 2
        out = self.wpath("out")
        job = self.torchrun(ranks, out)
        self.watch_job(job)
        self.run_ok(job)
        self.watch.stop()
        self.check_ranks(out, ranks)
        s, distinct = self.check_builds(ranks)
        # One shared cache dir: the ranks build the same kernels; each runs once.
        sources = {e["argv"][1] for e in self.compiler_execs()
                   if not self.is_probe(e["argv"]) and e["argv"][1].endswith(".cpp")}
        self.assertEqual(len(distinct), len({build_key(e) for e in self.compiler_execs()
                                             if not self.is_probe(e["argv"])}))
        print(f"shared cache dir, {ranks} ranks: {s}; {len(sources)} kernel sources", file=sys.stderr)

    def test_ranks_one_cache_dir_each(self):
        ranks = 2
        out = self.wpath("out")
        job = self.torchrun(ranks, out, env={"CCPOOL_TORCH_PER_RANK_CACHE": self.path("per-rank")})
        self.watch_job(job)
        self.run_ok(job)
        self.watch.stop()
        results = self.check_ranks(out, ranks)
        self.assertEqual({r["cache_dir"] for r in results},
                         {self.path("per-rank", f"rank{r}") for r in range(ranks)})
        s, distinct = self.check_builds(ranks)
        print(f"one cache dir per rank, {ranks} ranks: {s}", file=sys.stderr)

    def test_ranks_in_a_container_each(self):
        """A container per rank: each rank in a mount namespace of its own
        whose TMPDIR (one path for all, holding Inductor's cache dir) is its
        own directory (support/bin/private-tmp-rank). Plain ranks would share
        nothing; the service serves each in its own view, so every distinct
        build (the same command line and bytes in both views) still runs
        once, the graphs are single flights, and each rank's private cache
        holds its own copy of the kernels."""
        probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"], capture_output=True)
        if probe.returncode != 0:
            self.skipTest("unshare --mount is not permitted here: " + probe.stderr.decode(errors="replace").strip())
        ranks = 2
        out = self.wpath("out")
        view, private = self.wpath("view"), self.wpath("rank-tmp")
        os.makedirs(view)
        job = self.ccpool_run(VENV_PY, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks),
                              "--no-python", os.path.join(HERE, "bin", "private-tmp-rank"), VENV_PY, MODEL,
                              "--out-dir", out, jobs=JOBS,
                              env={"TMPDIR": view, "TORCHINDUCTOR_CACHE_DIR": os.path.join(view, "inductor"),
                                   "CCPOOL_TEST_RANK_TMP": private})
        self.watch_job(job)
        self.run_ok(job)
        self.watch.stop()
        results = self.check_ranks(out, ranks)
        self.assertEqual({r["cache_dir"] for r in results}, {os.path.join(view, "inductor")})
        # Only the launcher, outside the ranks' namespaces, writes there (its torchelastic_* dir).
        self.assertEqual([n for n in os.listdir(view) if not n.startswith("torchelastic_")], [],
                         "a rank wrote to the launcher's TMPDIR, not to its own")
        for r in range(ranks):
            kernels = [f for _, _, files in os.walk(os.path.join(private, f"rank{r}", "inductor"))
                       for f in files if f.endswith(".so")]
            self.assertTrue(kernels, f"rank {r}'s private cache holds no kernel")
        misses = sum(r["counters"].get("inductor", {}).get("fxgraph_cache_miss", 0) for r in results)
        self.assertEqual(misses, len(PIECES), [r["counters"] for r in results])
        s, distinct = self.check_builds(ranks)
        print(f"a container per rank, {ranks} ranks: {s}", file=sys.stderr)

    def test_accelerate_launch(self):
        """`ccpool run -- accelerate launch --multi_gpu --num_processes 2`, the
        way a GPU node launches (accelerate's torchrun-based launcher; on this
        CPU-only machine the ranks use gloo; `--cpu` would need mpirun): ccpool
        reads the rank count from accelerate's flag (the fair share reaches each
        rank before `import torch`), and each distinct build runs once."""
        accelerate = os.path.join(os.path.dirname(VENV_PY), "accelerate")
        if not os.access(accelerate, os.X_OK):
            self.fail(f"{accelerate} is missing: scripts/setup-deps.sh pins accelerate in the venv")
        ranks = 2
        out = self.wpath("out")
        job = self.ccpool_run(accelerate, "launch", "--multi_gpu", "--num_processes", str(ranks), "--num_machines", "1",
                              "--mixed_precision", "no", "--dynamo_backend", "no", MODEL, "--out-dir", out,
                              env={"HF_HUB_OFFLINE": "1", "HF_HOME": self.path("hf")})
        self.watch_job(job)
        self.run_ok(job)
        self.watch.stop()
        self.check_ranks(out, ranks)
        s, distinct = self.check_builds(ranks)
        print(f"accelerate launch, {ranks} ranks: {s}", file=sys.stderr)

    def test_slurm_srun_tasks(self):
        """`srun --ntasks-per-node 2 ccpool run -- python model.py` on a real
        (private, one-node) Slurm: each task runs its own `ccpool run`, both
        reach one service, the rank count comes from SLURM_NTASKS_PER_NODE
        (set before the interpreter starts), and each distinct build runs once.
        The task script maps SLURM_PROCID/SLURM_NTASKS to torch's RANK and
        WORLD_SIZE, as Slurm batch scripts for torch do."""
        why = SlurmCluster.missing()
        if why:
            self.skipTest(why)
        cluster = SlurmCluster(self.path("slurm"))
        cluster.start()
        self.addCleanup(cluster.stop)
        ranks = 2
        out = self.wpath("out")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        task = ('export RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS LOCAL_RANK=$SLURM_LOCALID '
                f'MASTER_ADDR=127.0.0.1 MASTER_PORT={port}; exec "$@"')
        inner = [CCPOOL, "run", "--socket", self.sock, "--dir", self.store, "--jobs", str(JOBS), "--",
                 VENV_PY, MODEL, "--out-dir", out]
        job = self._run(["srun", "-N1", "--ntasks-per-node", str(ranks), "--kill-on-bad-exit=1",
                         "bash", "-c", task, "task", *inner], env=cluster.env)
        self.watch_job(job)
        try:
            self.run_ok(job)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{cluster.logs()}") from None
        self.watch.stop()
        results = self.check_ranks(out, ranks)
        self.assertEqual(sorted(r["rank"] for r in results), list(range(ranks)))
        self.assertEqual({r["world"] for r in results}, {ranks})
        s, distinct = self.check_builds(ranks)
        self.assertEqual(len(serve_pids(self.sock)), 1, "the tasks did not share one service")
        print(f"srun, {ranks} tasks: {s}", file=sys.stderr)

    def test_fresh_node_rerun_zero_executions(self):
        """Run once; then empty the Inductor cache dir (FX graph cache
        included) and the precompiled-header dir, as a fresh node with the
        same paths has them, and run again: no compiler runs, and every
        kernel .so and the .gch come from the store (PCH bytes are not
        deterministic, so identical bytes prove it)."""
        out1, out2 = self.wpath("out1"), self.wpath("out2")
        self.run_ok(self.ccpool_run(VENV_PY, MODEL, "--out-dir", out1))
        self.check_ranks(out1, 1)
        inductor = self.env["TORCHINDUCTOR_CACHE_DIR"]
        first = self.files_under(inductor, (".so",))
        first_gch = self.files_under(self.tmp, (".gch",))
        self.assertGreaterEqual(len(first), 3, sorted(first))
        self.assertEqual(len(first_gch), 1, sorted(first_gch))
        before = self.status_summary()
        shutil.rmtree(inductor)
        shutil.rmtree(self.tmp)
        os.makedirs(self.tmp)
        os.remove(self.exec_log)
        self.run_ok(self.ccpool_run(VENV_PY, MODEL, "--out-dir", out2))
        self.check_ranks(out2, 1)
        after = self.status_summary()
        delta = {k: after[k] - before[k] for k in before if k != "peak_running"}
        probes = [e for e in self.compiler_execs() if self.is_probe(e["argv"])]
        detail = f"rerun deltas {delta}; not stored: {self.not_stored_reasons()}"
        print(f"fresh node: first run {before}, rerun deltas {delta}", file=sys.stderr)
        self.assertEqual(delta["misses"], 0, detail)
        self.assertEqual(delta["not_stored"], 0, detail)
        self.assertEqual(delta["executions"], len(probes), detail)
        second = self.files_under(inductor, (".so",))
        second_gch = self.files_under(self.tmp, (".gch",))
        self.assertEqual(sorted(second), sorted(first))
        for name in first:
            self.assertEqual(second[name], first[name], name)
        self.assertEqual(second_gch, first_gch, "the .gch was rebuilt, not served")

    def test_ctrl_c_leaves_no_process(self):
        """8 compile threads per rank (the user's TORCHINDUCTOR_COMPILE_THREADS
        is kept), SIGINT to `ccpool run` while a compile runs: after the grace
        period nothing of the job is left, and the service's compilers end.
        (On CPU, Inductor 2.13 compiles C++ kernels on a thread pool inside
        each rank; its compile-worker sidecar starts only for Triton.)"""
        ranks = 2
        out = self.wpath("out")
        job = self.torchrun(ranks, out, flags=("--grace", "2s"),
                            env={"TORCHINDUCTOR_COMPILE_THREADS": "8"})
        watch = self.watch_job(job)
        self.wait_status(lambda s: s["running"] >= 1 and s["requests"] >= 4,
                         "a compile of the job to be running")
        job.send_signal(signal.SIGINT)
        rc, _, err = self.finish_run(job, guard=120)
        watch.stop()
        job_pids = sorted(watch.seen)
        self.assertGreater(len(job_pids), ranks, "the watch saw the job's processes")
        left = [(p, watch.seen[p]) for p in job_pids
                if not pid_gone(p) and p not in serve_pids(self.sock)]
        self.assertEqual(left, [], f"processes of the job left after ccpool run exited {rc}")
        # The service cancels the job's compiles once their clients are gone.
        def compilers_under_service():
            from torch_case import descendants
            return [p for s in serve_pids(self.sock) for p in descendants(s)
                    if proc_name(p) in ("cc1plus", "g++", "as", "ld", "collect2")]
        wait_until(lambda: not compilers_under_service(), "the service's compilers to end", timeout=30)
        pythons = sum(1 for n in watch.seen.values() if n.startswith("python"))
        print(f"ctrl-c: rc {rc}, {len(job_pids)} job processes seen ({pythons} python), "
              f"0 left; status {self.status_summary()}", file=sys.stderr)


class FrameworksCacheTest(ModelCase):
    def test_fx_graph_from_the_front(self):
        """Without ccpool's hooks (`--no-python-hooks`): Inductor's own
        redis-py backend. Process A compiles with --frameworks-cache; process
        B starts with an empty Inductor cache dir (and no precompiled headers)
        and gets every FX graph from the Redis front, as torch's own counters
        say. redis-py as pip installs it today (8.x) opens with HELLO 3 (RESP3)."""
        self.check_fx_graph_from_the_front({}, ("--no-python-hooks",))

    def test_fx_graph_from_the_front_resp2(self):
        """The same with the client held to RESP2 (?protocol=2 on the URL, a
        value the user set, which ccpool keeps)."""
        url = "unix://" + os.path.join(self.run_dir, "resp.sock") + "?protocol=2"
        self.check_fx_graph_from_the_front({"TORCHINDUCTOR_REDIS_URL": url}, ("--no-python-hooks",))

    def test_fx_graph_from_the_front_without_redis(self):
        """With the hooks (the default), --frameworks-cache works in a venv
        without the `redis` package: ccpool's own backend speaks to the front."""
        self.check_fx_graph_from_the_front({"CCPOOL_TEST_HIDE_REDIS": "1"}, ())

    def check_fx_graph_from_the_front(self, extra_env, flags):
        out_a, out_b = self.wpath("a"), self.wpath("b")
        flags = ("--frameworks-cache", *flags)
        hooks = "--no-python-hooks" not in flags
        self.run_ok(self.ccpool_run(VENV_PY, MODEL, "--out-dir", out_a, flags=flags, env=extra_env))
        a = self.check_ranks(out_a, 1, hooks=hooks)[0]
        self.assertEqual(a["counters"]["inductor"].get("fxgraph_cache_write_error", 0), 0,
                         f"Inductor could not write to the front: {a['counters']}")
        self.assertEqual(a["counters"]["inductor"].get("fxgraph_cache_hit", 0), 0, a)
        self.assertGreaterEqual(a["counters"]["inductor"].get("fxgraph_cache_miss", 0), len(PIECES), a)
        s = self.status()
        self.assertGreater(s["resp_commands"], 0, "the front was not used")
        env = {"TORCHINDUCTOR_CACHE_DIR": self.path("inductor-b"), "TMPDIR": self.path("tmp-b"),
               **extra_env}
        os.makedirs(env["TMPDIR"])
        self.run_ok(self.ccpool_run(VENV_PY, MODEL, "--out-dir", out_b, flags=flags, env=env))
        b = self.check_ranks(out_b, 1, hooks=hooks)[0]
        print(f"frameworks cache: A {a['counters']}, B {b['counters']}", file=sys.stderr)
        self.assertEqual(b["counters"]["inductor"].get("fxgraph_cache_hit", 0), len(PIECES), b)
        self.assertEqual(b["counters"]["inductor"].get("fxgraph_cache_miss", 0), 0, b)


if __name__ == "__main__":
    main()
