"""bench/torch/seed.py: the seed scenario of issues 24 and 25, plain torchrun and
`ccpool run` side by side in one invocation, on whatever machine runs it.

workers  (issue 24) R ranks x TORCHINDUCTOR_COMPILE_THREADS=T, each compiling the
         fixture Triton kernels for its own GPU index through Inductor's own
         AsyncCompile (tests/torch/support/inductor_ranks.py; no GPU needed, see
         tests/torch/fixtures/triton/README.md). Runs: plain torchrun; ccpool run
         (cold store); ccpool run again with Inductor's cache emptied (a fresh node,
         warm store); and SIGINT to each launcher while compiles run.
graphs   (issue 25) R ranks of tests/torch/support/model.py (3 graphs, a fourth
         with --graph-deep N; Inductor's CPU backend, or --device cuda), started
         together: one plain rank alone, cold and again on its filled cache
         (warm); then plain torchrun and ccpool run with one Inductor cache dir
         for all ranks (Inductor's file locks then share the C++ builds among
         plain ranks), with a cache dir and TMPDIR per rank (other paths), and
         with a private TMPDIR per rank at one path (a container per rank: a
         mount namespace each, needs root), --graph-dirs. Ends with the goals of
         issue 25 against single flight's floor: one cold rank plus R-1 warm ones.

Measured per run: wall; the compile phase's CPU, every process counted (the
ranks' own compile-phase CPU, the compilers they waited for and their own
compile-worker pools, which outlive the phase (rank_pool_cpu_s; counted since
2026-11-27); under ccpool also the service with its workers and compilers,
which is fresh for each run);
peak Python compile processes (not ranks, not launchers, older than 0.25 s) and
their summed PSS (shared pages split among the processes that share them); ptxas compiles (a logging ptxas); Inductor's own counters.

  /usr/bin/python3 bench/torch/seed.py [--ranks 8] [--threads 32] [--jobs N] [--only workers|graphs]
      [--device cpu|cuda] [--graph-dirs shared|per-rank|private-tmp|all] [--graph-reps N] [--out bench/torch/seed.json]
Prints one JSON line per run and a markdown table at the end; writes --out.
"""
import argparse
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
SUPPORT = os.path.join(ROOT, "tests", "torch", "support")
RANKS_SCRIPTS = ("inductor_ranks.py", "model.py")


def read(path, default=None):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return default


def proc_stat(pid):
    raw = read(f"/proc/{pid}/stat")
    if raw is None:
        return None
    text = raw.decode(errors="replace")
    name = text[text.find("(") + 1:text.rfind(")")]
    return name, text[text.rfind(")") + 2:].split()


def cpu_s(fields, children=True):
    tick = os.sysconf("SC_CLK_TCK")
    own = int(fields[11]) + int(fields[12])
    return (own + (int(fields[13]) + int(fields[14]) if children else 0)) / tick


def children_map():
    kids = {}
    for e in os.listdir("/proc"):
        if e.isdigit():
            st = proc_stat(e)
            if st and st[1][0] != "Z":
                kids.setdefault(int(st[1][1]), []).append(int(e))
    return kids


def tree(roots, kids):
    out, todo = [], list(roots)
    while todo:
        for c in kids.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def serve_pids(sock):
    found = []
    for e in os.listdir("/proc"):
        if e.isdigit():
            argv = (read(f"/proc/{e}/cmdline") or b"").split(b"\0")
            if sock.encode() in argv and b"serve" in argv:
                found.append(int(e))
    return found


def is_compile_process(pid, name, fields):
    """A Python process that is neither a rank nor a launcher, older than 0.25 s
    (a fork on its way to exec ptxas carries its parent's name for a moment)."""
    if not name.startswith("python"):
        return False
    uptime = float((read("/proc/uptime") or b"0").split()[0])
    if uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK") < 0.25:
        return False
    argv = [a.decode(errors="replace") for a in (read(f"/proc/{pid}/cmdline") or b"").split(b"\0") if a]
    if not argv or any(os.path.basename(a) in RANKS_SCRIPTS for a in argv):
        return False
    return not any(a in ("torch.distributed.run",) or a.endswith("/torchrun") for a in argv)


def pss_kb(pid):
    """Proportional set size: forked workers share pages, and summed RSS would count them once per worker."""
    for line in (read(f"/proc/{pid}/smaps_rollup") or b"").decode(errors="replace").splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    return 0


class Sampler:
    def __init__(self, roots):
        self.roots = roots
        self.peak = self.peak_rss_kb = 0
        self.seen = set()
        self.stop_ev = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        while not self.stop_ev.is_set():
            kids = children_map()
            n = rss = 0
            for p in tree(self.roots(), kids):
                st = proc_stat(p)
                if not st:
                    continue
                self.seen.add(p)
                if is_compile_process(p, st[0], st[1]):
                    n += 1
                    rss += pss_kb(p)
            self.peak = max(self.peak, n)
            self.peak_rss_kb = max(self.peak_rss_kb, rss)
            time.sleep(0.1)

    def stop(self):
        self.stop_ev.set()
        self.thread.join()


def graph_ratios(ranks, cold, warm, plain, ccpool):
    """One repetition of the graph scenario: issue 25's two measures, and the floor that single flight can
    reach, one rank compiling every graph (cold) and ranks-1 ranks loading them (warm)."""
    floor = cold["compile_cpu_s"] + (ranks - 1) * warm["compile_cpu_s"]
    plain_cpu, ccpool_cpu = plain.get("compile_cpu_s"), ccpool.get("compile_cpu_s")
    one_wall, wall = cold.get("compile_wall_s"), ccpool.get("compile_wall_s")
    return {"plain_cpu_s": plain_cpu, "ccpool_cpu_s": ccpool_cpu, "floor_cpu_s": round(floor, 1),
            "one_rank_wall_s": one_wall, "ccpool_wall_s": wall,
            "cpu_vs_plain": round(ccpool_cpu / plain_cpu, 2) if plain_cpu and ccpool_cpu else None,
            "floor_vs_plain": round(floor / plain_cpu, 2) if plain_cpu else None,
            "cpu_vs_floor": round(ccpool_cpu / floor, 2) if ccpool_cpu and floor else None,
            "wall_vs_one_rank": round(wall / one_wall, 2) if wall and one_wall else None}


def graph_goals(mode, ranks, reps):
    """The medians over the repetitions of one placement of the ranks' caches, and a line that says them."""
    def median(key):
        values = sorted(r[key] for r in reps if r.get(key) is not None)
        if not values:
            return None
        mid = len(values) // 2
        return values[mid] if len(values) % 2 else round((values[mid - 1] + values[mid]) / 2, 2)

    def each(key):
        return ", ".join(str(r.get(key)) for r in reps)

    res = {"dirs": mode, "ranks": ranks, "reps": reps}
    for key in ("cpu_vs_plain", "floor_vs_plain", "cpu_vs_floor", "wall_vs_one_rank"):
        res[key] = median(key)
    res["text"] = (f"graphs, {mode} cache dirs, R = {ranks}, medians of {len(reps)}: compile-phase CPU ccpool/plain "
                   f"{res['cpu_vs_plain']}x ({each('cpu_vs_plain')}; goal <= 0.5x); single flight's floor (one cold "
                   f"rank + {ranks - 1} warm) {res['floor_vs_plain']}x plain ({each('floor_vs_plain')}), ccpool "
                   f"{res['cpu_vs_floor']}x the floor; compile wall {res['wall_vs_one_rank']}x one rank alone "
                   f"({each('wall_vs_one_rank')}; goal <= 1.1x where the machine has >= {ranks} cores, this one "
                   f"has {os.cpu_count()})")
    return res


class Bench:
    def __init__(self, args):
        self.args = args
        self.ccpool = os.path.join(args.build, "bin", "ccpool")
        self.python = args.python or os.path.join(args.venv, "bin", "python")
        self.root = tempfile.mkdtemp(prefix="ccpool-seed.")
        self.rows = []
        self.summary = []

    def env(self, d, threads, extra=None):
        e = {k: v for k, v in os.environ.items()
             if not k.startswith(("CCPOOL_", "TORCHINDUCTOR_", "TRITON_")) and k != "LD_PRELOAD"}
        if threads:
            e["TORCHINDUCTOR_COMPILE_THREADS"] = str(threads)
        e.update(PATH=f"{os.path.dirname(self.python)}:/usr/local/bin:/usr/bin:/bin", TMPDIR=f"{d}/tmp",
                 TORCHINDUCTOR_CACHE_DIR=f"{d}/inductor", PYTHONPATH=SUPPORT, OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1",
                 TEST_PTXAS_LOG=f"{d}/ptxas.log", TEST_REAL_PTXAS=self.args.ptxas,
                 TRITON_PTXAS_PATH=os.path.join(SUPPORT, "bin", "ptxas"))
        e.update(extra or {})
        os.makedirs(e["TMPDIR"], exist_ok=True)
        return e

    def command(self, d, script, ranks, via, extra_args=(), private_tmp=False):
        entry = [os.path.join(SUPPORT, script)]
        if private_tmp:
            # Each rank in a mount namespace of its own whose $TMPDIR (one path for all ranks) is its own
            # directory, as in a container per rank: the same paths, other files.
            entry = ["--no-python", os.path.join(SUPPORT, "bin", "private-tmp-rank"), self.python, *entry]
        run = [self.python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks),
               *entry, "--out-dir", f"{d}/out", *extra_args]
        if not via:
            return run
        return [self.ccpool, "run", "--socket", f"{d}/run/sock", "--dir", f"{d}/store", "--jobs",
                str(self.args.jobs), "--", *run]

    def service_cpu(self, d):
        """CPU of the (fresh) service: itself, what it reaped, its live workers; and its own threads' part."""
        total = own = 0.0
        kids = children_map()
        for pid in serve_pids(f"{d}/run/sock"):
            st = proc_stat(pid)
            if st:
                total += cpu_s(st[1])
                own += cpu_s(st[1], children=False)
            for c in tree([pid], kids):
                st = proc_stat(c)
                if st:
                    total += cpu_s(st[1], children=False)
        return total, own

    def status(self, d):
        r = subprocess.run([self.ccpool, "status", "--socket", f"{d}/run/sock", "--json"], capture_output=True,
                           text=True)
        return json.loads(r.stdout) if r.returncode == 0 else {}

    def run(self, label, d, script, ranks, via, env=None, sigint=False, extra_args=(), private_tmp=False):
        before = os.times()
        p = subprocess.Popen(self.command(d, script, ranks, via, extra_args, private_tmp),
                             env=self.env(d, self.args.threads if script == "inductor_ranks.py" else None, env),
                             stdout=subprocess.DEVNULL, stderr=open(f"{d}.stderr.log", "ab"),
                             start_new_session=True)
        sock = f"{d}/run/sock"
        sampler = Sampler(lambda: [p.pid] + (serve_pids(sock) if via else []))
        start = time.monotonic()
        res = {"run": label, "ranks": ranks}
        if sigint:
            # Once compiles run: held at the gate (TEST_WORKER_GATE), else any compile process.
            gate = (env or {}).get("TEST_WORKER_GATE")
            def compiling():
                return glob.glob(os.path.join(gate, "running.*")) if gate else sampler.peak > 0
            while p.poll() is None and not compiling() and time.monotonic() - start < 600:
                time.sleep(0.05)
            time.sleep(1.0)
            services = serve_pids(sock)
            job = set(sampler.seen) - set(services) - set(tree(services, children_map()))  # the pool stays
            p.send_signal(signal.SIGINT)
            time.sleep(7.0)  # past ccpool run's default --grace (5 s)
            alive = [pid for pid in job if proc_stat(pid) and proc_stat(pid)[1][0] != "Z"]
            res["left_after_sigint_7s"] = len(alive)
            if via:
                res["pool_busy_after_sigint"] = self.status(d).get("worker_pool", {}).get("busy")
            for pid in alive:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        try:
            rc = p.wait(timeout=self.args.run_timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)  # the launcher's session: its ranks and their compilers
            rc = p.wait()
            res["timed_out_s"] = self.args.run_timeout
        res["wall_s"] = round(time.monotonic() - start, 1)
        sampler.stop()
        after = os.times()
        job_cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
        res.update(rc=rc, peak_compile_processes=sampler.peak, peak_compile_pss_mb=sampler.peak_rss_kb // 1024)
        res["ptxas_compiles"] = sum(1 for line in (read(f"{d}/ptxas.log", b"") or b"").decode().splitlines()
                                    if " -o " in f" {line}")
        if via:
            s = self.status(d)
            total, own = self.service_cpu(d)
            res["service_cpu_s"] = round(total, 1)
            res["service_own_cpu_s"] = round(own, 2)  # its threads, without the compilers and workers it ran
            res["worker_pool"] = {k: s.get("worker_pool", {}).get(k) for k in ("peak_workers", "jobs", "followed", "forked", "zygotes_started")}
            res["leases"] = s.get("leases", {})
            res["service"] = {k: s.get(k) for k in ("requests", "hits", "joins", "misses", "passthrough", "executions")}
            subprocess.run([self.ccpool, "stop", "--socket", sock], capture_output=True)
        res["job_cpu_s"] = round(job_cpu, 1)
        outs = [json.loads(read(f, b"{}")) for f in sorted(glob.glob(f"{d}/out/rank*.json"))]
        if outs:
            res["compile_wall_s"] = round(max(o.get("compile_s", 0) for o in outs), 1)
            res["rank_compile_cpu_s"] = round(sum(o.get("cpu_compile_s", 0) + o.get("children_cpu_compile_s", 0)
                                                  + o.get("pool_cpu_compile_s", 0) for o in outs), 1)
            res["rank_pool_cpu_s"] = round(sum(o.get("pool_cpu_compile_s", 0) for o in outs), 1)
            res["fxgraph_cache_miss"] = sum(o.get("counters", {}).get("inductor", {}).get("fxgraph_cache_miss", 0)
                                            for o in outs)
            res["ok"] = len(outs) == ranks and all(all(o.get("ok", {"?": True}).values()) for o in outs)
            errors = {k: v for o in outs for k, v in o.get("errors", {}).items()}
            if errors:
                res["errors"] = errors
        res["compile_cpu_s"] = round(res.get("rank_compile_cpu_s", 0) + res.get("service_cpu_s", 0), 1)
        print(json.dumps(res), flush=True)
        self.rows.append(res)
        return res

    def workers(self, sigint_only=False):
        r = self.args.ranks
        nogpu = {"NOGPU_COMPILE_SHIM": "1"}  # tests/torch/fixtures/triton/README.md
        if not sigint_only:
            self.cold_and_fresh(r, nogpu)
        for via, label in ((False, "workers: plain + SIGINT"), (True, "workers: ccpool + SIGINT")):
            gate = {**nogpu, "TEST_WORKER_GATE": f"{self.root}/gate-{via}"}  # compiles hold: never "go"
            os.makedirs(gate["TEST_WORKER_GATE"], exist_ok=True)
            self.run(label, f"{self.root}/w-int-{via}", "inductor_ranks.py", r, via, env=gate, sigint=True)

    def cold_and_fresh(self, r, nogpu):
        self.run("workers: plain", f"{self.root}/w-plain", "inductor_ranks.py", r, False, env=nogpu)
        d = f"{self.root}/w-ccpool"
        self.run("workers: ccpool (cold store)", d, "inductor_ranks.py", r, True, env=nogpu)
        shutil.rmtree(f"{d}/inductor", ignore_errors=True)
        shutil.rmtree(f"{d}/out", ignore_errors=True)
        os.remove(f"{d}/ptxas.log") if os.path.exists(f"{d}/ptxas.log") else None
        self.run("workers: ccpool (fresh node)", d, "inductor_ranks.py", r, True, env=nogpu)

    def graphs(self):
        r = self.args.graph_ranks
        extra = ("--device", self.args.device, "--deep", str(self.args.graph_deep))
        env = {"NOGPU_COMPILE_SHIM": "1"} if self.args.device == "cpu" else {}
        if self.args.graph_threads:
            env["TORCHINDUCTOR_COMPILE_THREADS"] = str(self.args.graph_threads)
        modes = {"shared": ("", None),
                 "per-rank": (", a cache dir and TMPDIR per rank", lambda d: {
                     "CCPOOL_TORCH_PER_RANK_CACHE": f"{d}/inductor", "CCPOOL_TORCH_PER_RANK_TMP": f"{d}/rank-tmp"}),
                 "private-tmp": (", a private TMPDIR per rank at one path", lambda d: {
                     "TMPDIR": f"{d}/view", "TORCHINDUCTOR_CACHE_DIR": f"{d}/view/inductor",
                     "CCPOOL_TEST_RANK_TMP": f"{d}/rank-tmp"})}
        chosen = tuple(modes) if self.args.graph_dirs == "all" else (self.args.graph_dirs,)
        reps = {mode: [] for mode in chosen}
        # This machine's speed drifts by tens of percent over minutes: each repetition measures its own floor
        # and its own pairs, in alternating order, and the goals take the median of the repetitions' ratios.
        for rep in range(self.args.graph_reps):
            one = f"{self.root}/g-one-{rep}"
            cold = self.run("graphs: one rank alone", one, "model.py", 1, False, env=env, extra_args=extra)
            # The same rank again on its filled Inductor cache: what a rank that loads every graph still spends
            # (Dynamo, the cache's lookups and loads, Inductor's compiler probes). No single flight saves it.
            shutil.rmtree(f"{one}/out", ignore_errors=True)
            warm = self.run("graphs: one rank alone, warm cache", one, "model.py", 1, False, env=env,
                            extra_args=extra)
            for mode in chosen:
                suffix, dirs = modes[mode]
                runs = {}
                order = ((False, "plain"), (True, "ccpool"))
                for via, name in (order if rep % 2 == 0 else order[::-1]):
                    d = f"{self.root}/g-{name}-{mode}-{rep}"
                    runs[name] = self.run(f"graphs: {name}{suffix}", d, "model.py", r, via,
                                          env={**env, **(dirs(d) if dirs else {})}, extra_args=extra,
                                          private_tmp=mode == "private-tmp")
                reps[mode].append(graph_ratios(r, cold, warm, runs["plain"], runs["ccpool"]))
        for mode in chosen:
            self.summary.append(graph_goals(mode, r, reps[mode]))
        if self.args.graph_sigint:
            for via, label in ((False, "graphs: plain + SIGINT"), (True, "graphs: ccpool + SIGINT")):
                gate = {**env, "TEST_WORKER_GATE": f"{self.root}/ggate-{via}"}  # Triton compiles hold
                os.makedirs(gate["TEST_WORKER_GATE"], exist_ok=True)
                self.run(label, f"{self.root}/g-int-{via}", "model.py", r, via, env=gate, sigint=True,
                         extra_args=extra)

    def table(self):
        cols = ["run", "ranks", "wall_s", "compile_wall_s", "compile_cpu_s", "job_cpu_s", "service_cpu_s",
                "peak_compile_processes", "peak_compile_pss_mb", "ptxas_compiles", "fxgraph_cache_miss",
                "left_after_sigint_7s"]
        lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        for row in self.rows:
            lines.append("| " + " | ".join(str(row.get(c, "")) for c in cols) + " |")
        return "\n".join(lines)

    def main(self):
        meta = {"cpus": os.cpu_count(), "jobs": self.args.jobs, "threads": self.args.threads,
                "loadavg_start": os.getloadavg()}
        if self.args.only in (None, "workers"):
            self.workers()
        if self.args.only == "sigint":
            self.workers(sigint_only=True)
        if self.args.only in (None, "graphs"):
            self.graphs()
        meta["loadavg_end"] = os.getloadavg()
        with open(self.args.out, "w") as f:
            json.dump({"meta": meta, "runs": self.rows, "graph_goals": self.summary}, f, indent=1)
        print(json.dumps(meta))
        print(self.table())
        for line in self.summary:
            print(line["text"])
        if self.args.keep:
            print(f"kept {self.root}")
        else:
            shutil.rmtree(self.root, ignore_errors=True)


def parser():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=8, help="ranks of the worker-pool scenario (default 8)")
    ap.add_argument("--graph-ranks", type=int, default=4, help="ranks of the graph scenario (default 4)")
    ap.add_argument("--threads", type=int, default=32, help="TORCHINDUCTOR_COMPILE_THREADS per rank (default 32)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count(), help="ccpool run --jobs (default: CPUs)")
    ap.add_argument("--only", choices=("workers", "graphs", "sigint"))
    ap.add_argument("--device", default="cpu", help="the graph scenario's device: cpu or cuda")
    ap.add_argument("--graph-threads", type=int, help="TORCHINDUCTOR_COMPILE_THREADS for the graph scenario")
    ap.add_argument("--graph-dirs", choices=("shared", "per-rank", "private-tmp", "all"), default="all",
                    help="the graph scenario's Inductor cache dir: one for all ranks (Inductor's file locks share "
                         "its C++ builds), one per rank with its own TMPDIR (other paths), a private TMPDIR per rank "
                         "at one path (a container per rank: each rank in its own mount namespace), or all three")
    ap.add_argument("--graph-reps", type=int, default=1,
                    help="repetitions of the graph scenario (each with its own floor); the goals take medians")
    ap.add_argument("--graph-sigint", action="store_true", help="also SIGINT each launcher mid-compile (GPU)")
    ap.add_argument("--graph-deep", type=int, default=0,
                    help="model.py --deep N: a fourth graph of N blocks with kernels of their own (default 0)")
    ap.add_argument("--ptxas", default="/usr/local/cuda/bin/ptxas")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--venv", default=os.environ.get("CCPOOL_VENV", os.path.join(ROOT, "build", "venv")))
    ap.add_argument("--python", help="the interpreter with torch (default: the venv's)")
    ap.add_argument("--out", default=os.path.join(HERE, "seed.json"))
    ap.add_argument("--keep", action="store_true", help="keep the runs' directories and logs")
    ap.add_argument("--run-timeout", type=float, help="kill a run's launcher and ranks after this many seconds "
                                                      "(default: no bound)")
    return ap


def main():
    args = parser().parse_args()
    python = args.python or os.path.join(args.venv, "bin", "python")
    if not os.access(python, os.X_OK):
        print(f"bench/torch/seed.py: no interpreter at {python} (scripts/setup-deps.sh makes the venv)",
              file=sys.stderr)
        return 125
    Bench(args).main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
