"""bench/torch: the seed scenario, measured on the real thing (issue 14).

A node of 8 ranks x 32 compile workers is simulated by forcing
TORCHINDUCTOR_COMPILE_THREADS=32 in each of R ranks (torchrun, gloo, CPU),
compiling tests/torch/support/model.py (three graphs, Inductor's CPU backend),
without ccpool and under `ccpool run`. For each R:
  plain      torchrun alone, cold Inductor cache
  ccpool     ccpool run -- torchrun, cold store, cold Inductor cache
  fresh      ccpool again with the Inductor cache dir and $TMPDIR (precompiled
             headers) emptied: a fresh node with a warm ccpool store
  ccpool_fc, fresh_fc (--fc-ranks, default R=1)  the same pair under
             `ccpool run --frameworks-cache`: the FX graph cache goes to the
             service's Redis front too
  sigint     plain and ccpool: SIGINT to the launcher once a compiler runs;
             processes of the job still alive 2 s later
Measured: compile phase (max over ranks of the model's own timer), compiler
executions (the job's exec log without ccpool; the service's counter with
it), peak compiler processes, peak compile-worker processes, peak summed RSS
of the job tree (and the service's children), processes left after SIGINT.

Memory guard: a configuration whose predicted peak RSS (from the measured
R=1 plain run, scaled by R) exceeds 80% of MemTotal (or MemAvailable at the
start, when lower: the machine may be shared) is reported as "would OOM"
with its estimate and not run.

Usage (from the checkout, after scripts/setup-deps.sh and a build):
  /usr/bin/python3 bench/torch/run.py [--ranks 1,2,4] [--threads 32] [--jobs N]
  build/venv/bin/python bench/torch/plot.py      # bench/torch/results.json -> real_torch.png
"""
import argparse
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
MODEL = os.path.join(SUPPORT, "model.py")
def is_compiler_job(name, has_children):
    """One process per compiler job: a driver (g++, gcc-12, ...) running a
    child (cc1plus, as, collect2), or ptxas. A driver without a child is a
    probe (`-###`, `--version`) that compiles nothing."""
    if name == "ptxas":
        return True
    return has_children and any(b in ("g++", "gcc", "c++", "cc") for b in name.split("-"))


def children_map():
    kids = {}
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        try:
            with open(f"/proc/{e}/stat") as f:
                st = f.read()
        except OSError:
            continue
        rest = st[st.rfind(")") + 2:].split()
        if rest[0] == "Z":
            continue
        kids.setdefault(int(rest[1]), []).append(int(e))
    return kids


def tree(roots, kids):
    out, todo = [], list(roots)
    while todo:
        p = todo.pop()
        for c in kids.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def info(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            status = f.read()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    name = status.split("\n", 1)[0].split(":", 1)[1].strip()
    rss = 0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1])
    return name, rss, cmd


class Sampler:
    def __init__(self, roots_fn):
        self.roots_fn = roots_fn
        self.peak_compilers = self.peak_workers = self.peak_rss_kb = 0
        self.seen = set()
        self.stop_ev = threading.Event()
        self.t = threading.Thread(target=self.loop, daemon=True)
        self.t.start()

    def loop(self):
        while not self.stop_ev.is_set():
            kids = children_map()
            pids = tree(self.roots_fn(), kids)
            compilers = workers = rss = 0
            for p in pids:
                i = info(p)
                if not i:
                    continue
                self.seen.add(p)
                name, r, cmd = i
                rss += r
                compilers += is_compiler_job(name, bool(kids.get(p)))
                workers += "compile_worker" in cmd
            self.peak_compilers = max(self.peak_compilers, compilers)
            self.peak_workers = max(self.peak_workers, workers)
            self.peak_rss_kb = max(self.peak_rss_kb, rss)
            time.sleep(0.05)

    def stop(self):
        self.stop_ev.set()
        self.t.join()


def serve_pids(sock):
    out = []
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                with open(f"/proc/{e}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if sock.encode() in argv and b"serve" in argv:
                out.append(int(e))
    return out


class Bench:
    def __init__(self, args):
        self.args = args
        self.ccpool = os.path.join(args.build, "bin", "ccpool")
        self.venv_py = os.path.join(args.venv, "bin", "python")
        self.root = tempfile.mkdtemp(prefix="ccpool-bench-torch.")

    def env(self, d, threads):
        e = {k: v for k, v in os.environ.items()
             if not k.startswith(("CCPOOL_", "TORCHINDUCTOR_", "TRITON_")) and k != "LD_PRELOAD"}
        e.update(PATH=f"{self.args.venv}/bin:/usr/local/bin:/usr/bin:/bin", TMPDIR=f"{d}/tmp",
                 TORCHINDUCTOR_CACHE_DIR=f"{d}/inductor", TORCHINDUCTOR_COMPILE_THREADS=str(threads),
                 PYTHONPATH=SUPPORT, CCPOOL_TORCH_EXECLOG=f"{d}/exec.log", OMP_NUM_THREADS="1",
                 PYTHONDONTWRITEBYTECODE="1")
        os.makedirs(e["TMPDIR"], exist_ok=True)
        return e

    def cmd(self, d, ranks, via_ccpool, frameworks_cache=False):
        run = [self.venv_py, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
               str(ranks), MODEL, "--out-dir", f"{d}/out"]
        if not via_ccpool:
            return run
        fc = ["--frameworks-cache"] if frameworks_cache else []
        return [self.ccpool, "run", "--socket", f"{d}/run/sock", "--dir", f"{d}/store", "--jobs",
                str(self.args.jobs), *fc, "--", *run]

    def status(self, d):
        r = subprocess.run([self.ccpool, "status", "--socket", f"{d}/run/sock", "--json"],
                           capture_output=True, text=True)
        return json.loads(r.stdout) if r.returncode == 0 else {}

    def run_once(self, d, ranks, via_ccpool, sigint=False, base=None, frameworks_cache=False):
        """base: the service's status before this run, when its store is reused."""
        env = self.env(d, self.args.threads)
        p = subprocess.Popen(self.cmd(d, ranks, via_ccpool, frameworks_cache), env=env, stdout=subprocess.DEVNULL,
                             stderr=open(f"{d}/stderr.log", "ab"), start_new_session=True)
        sock = f"{d}/run/sock"
        sampler = Sampler(lambda: [p.pid] + (serve_pids(sock) if via_ccpool else []))
        start = time.monotonic()
        left = None
        if sigint:
            while p.poll() is None and sampler.peak_compilers == 0 and time.monotonic() - start < 600:
                time.sleep(0.05)
            time.sleep(1.0)  # let the workers start compiling
            job = set(sampler.seen) - set(serve_pids(sock))
            p.send_signal(signal.SIGINT)
            time.sleep(2.0)
            left = sum(1 for pid in job if info(pid) is not None)
            time.sleep(5.0)  # past ccpool run's default --grace (5 s)
            alive = [pid for pid in job if info(pid) is not None]
            left_7s = len(alive)
            for pid in alive:  # the job's own leftovers: end them for the next run
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            p.wait()
        rc = p.wait()
        wall = time.monotonic() - start
        sampler.stop()
        res = {"rc": rc, "wall_s": round(wall, 1), "peak_compilers": sampler.peak_compilers,
               "peak_workers": sampler.peak_workers, "peak_rss_mb": sampler.peak_rss_kb // 1024}
        if left is not None:
            res["left_after_sigint_2s"] = left
            res["left_after_sigint_7s"] = left_7s
            return res
        ranks_out = []
        for r in range(ranks):
            try:
                with open(f"{d}/out/rank{r}.json") as f:
                    ranks_out.append(json.load(f))
            except FileNotFoundError:
                pass
        res["compile_s"] = round(max((x["compile_s"] for x in ranks_out), default=0), 1)
        res["ok"] = len(ranks_out) == ranks and all(all(x["ok"].values()) for x in ranks_out)
        execs = 0
        try:
            with open(f"{d}/exec.log") as f:
                execs = sum(1 for l in f if os.path.basename(json.loads(l)["argv"][0]) in ("g++", "gcc"))
        except FileNotFoundError:
            pass
        if via_ccpool:
            s = self.status(d)
            for k in ("executions", "hits", "misses", "passthrough", "not_stored"):
                res[k] = s.get(k, 0) - (base or {}).get(k, 0)
        else:
            res["executions"] = execs
        os.remove(f"{d}/exec.log") if os.path.exists(f"{d}/exec.log") else None
        return res

    def stop(self, d):
        subprocess.run([self.ccpool, "stop", "--socket", f"{d}/run/sock"], capture_output=True)

    def main(self):
        meminfo = dict(l.split(":", 1) for l in open("/proc/meminfo").read().splitlines())
        mem_total_mb = int(meminfo["MemTotal"].split()[0]) // 1024
        mem_avail_mb = int(meminfo["MemAvailable"].split()[0]) // 1024
        # 80% of RAM, or less when the machine is shared and has less free.
        limit_mb = min(0.8 * mem_total_mb, mem_avail_mb)
        results = {"threads": self.args.threads, "jobs": self.args.jobs, "mem_total_mb": mem_total_mb,
                   "mem_limit_mb": int(limit_mb), "cpus": os.cpu_count(), "runs": {}}
        per_rank_mb = None
        for ranks in self.args.ranks:
            key = f"R={ranks}"
            if per_rank_mb is not None and ranks * per_rank_mb > limit_mb:
                results["runs"][key] = {"would_oom_estimate_mb": ranks * per_rank_mb}
                print(f"{key}: would OOM (estimate {ranks * per_rank_mb} MiB)", flush=True)
                continue
            out = {}
            d = os.path.join(self.root, f"plain-{ranks}")
            out["plain"] = self.run_once(d, ranks, False)
            if per_rank_mb is None:
                per_rank_mb = out["plain"]["peak_rss_mb"] // ranks
            d = os.path.join(self.root, f"ccpool-{ranks}")
            out["ccpool"] = self.run_once(d, ranks, True)
            shutil.rmtree(f"{d}/inductor")
            shutil.rmtree(f"{d}/tmp")
            shutil.rmtree(f"{d}/out")
            print(key, "plain", json.dumps(out["plain"]), flush=True)
            print(key, "ccpool", json.dumps(out["ccpool"]), flush=True)
            out["fresh"] = self.run_once(d, ranks, True, base=self.status(d))
            self.stop(d)
            if ranks in self.args.fc_ranks:
                # The same pair with --frameworks-cache: Inductor's FX graph cache also goes to the service's
                # Redis front, so the fresh node skips Inductor's codegen as well as the compilers.
                d = os.path.join(self.root, f"ccpool-fc-{ranks}")
                out["ccpool_fc"] = self.run_once(d, ranks, True, frameworks_cache=True)
                for sub in ("inductor", "tmp", "out"):
                    shutil.rmtree(f"{d}/{sub}")
                out["fresh_fc"] = self.run_once(d, ranks, True, base=self.status(d), frameworks_cache=True)
                self.stop(d)
            if ranks == self.args.sigint_ranks:
                out["plain_sigint"] = self.run_once(os.path.join(self.root, f"plain-int-{ranks}"),
                                                    ranks, False, sigint=True)
                d = os.path.join(self.root, f"ccpool-int-{ranks}")
                out["ccpool_sigint"] = self.run_once(d, ranks, True, sigint=True)
                self.stop(d)
            results["runs"][key] = out
            print(key, json.dumps(out), flush=True)
        with open(self.args.out, "w") as f:
            json.dump(results, f, indent=1)
        shutil.rmtree(self.root, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", default="1,2,4")
    ap.add_argument("--threads", type=int, default=32)
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--sigint-ranks", type=int, default=2)
    ap.add_argument("--fc-ranks", default="1", help="rank counts that also run the --frameworks-cache pair")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--venv", default=os.environ.get("CCPOOL_VENV", os.path.join(ROOT, "build", "venv")))
    ap.add_argument("--out", default=os.path.join(HERE, "results.json"))
    args = ap.parse_args()
    args.ranks = [int(x) for x in args.ranks.split(",")]
    args.fc_ranks = [int(x) for x in args.fc_ranks.split(",") if x]
    if not os.access(os.path.join(args.venv, "bin", "python"), os.X_OK):
        print(f"bench/torch: no venv at {args.venv} (scripts/setup-deps.sh makes it)", file=sys.stderr)
        return 125
    Bench(args).main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
