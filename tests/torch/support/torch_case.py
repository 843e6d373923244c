"""Shared base of the real-torch suite (tests/torch/): torch.compile,
torchrun and Triton under `ccpool run`, each case with its own directory
(/tmp/ccpool-tests/e2e/<test>.XXXX: store/, run/sock, work/, and the
Inductor, Triton and temp dirs), its own service and socket, stopped at the
end (tests/e2e/support/e2e_case.py and tests/service/support/harness.py).

The workload runs in the project's venv (CCPOOL_VENV, made by
scripts/setup-deps.sh with pinned torch and triton). A venv that is missing,
or that setup-deps could not build (it leaves the reason in
$CCPOOL_VENV/ccpool-venv-failed), makes every case exit 125 printing why.

Independent views of what ran, next to the service's counters:
- support/sitecustomize.py (on PYTHONPATH) appends every subprocess that a
  Python process of the job starts to exec.log;
- ProcessWatch samples /proc for the job's process tree and the compilers
  running under it or under the service.
"""
import json
import os
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("CCPOOL_SOURCE_DIR", os.path.abspath(os.path.join(HERE, "..", "..", "..")))
sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "e2e", "support"))
from e2e_case import (CCPOOL, E2ECase, descendants, main, pid_gone,  # noqa: E402,F401
                      serve_pids, wait_until)
from service_fixture import stop_with_cli  # noqa: E402

VENV = os.environ.get("CCPOOL_VENV", os.path.join(os.path.dirname(CCPOOL), "..", "venv"))
VENV_PY = os.path.join(VENV, "bin", "python")
MODEL = os.path.join(HERE, "model.py")
TRITON_KERNELS = os.path.join(HERE, "triton_kernels.py")
RUN_GUARD_S = 480  # a hang guard for one torch job on a loaded 2-core machine, not a speed bound
def is_compiler_job(pid, name):
    """One process per compiler job: a driver (g++, gcc-12,
    x86_64-linux-gnu-g++-12, ...) that runs a child (cc1plus, as, collect2),
    or ptxas. Drivers without a child are the planner's own probes
    (`g++ -###`, `--version`), which print and exit without compiling. Under
    `ccpool run` the job's compiler execs become ccpool-client, so drivers
    run only under the service or as fallbacks."""
    if name == "ptxas":
        return True
    if not any(b in ("g++", "gcc", "c++", "cc") for b in name.split("-")):
        return False
    return bool(descendants(pid))


def proc_name(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.find("(") + 1:stat.rfind(")")]


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


# Python processes of a job that are neither a rank nor the launcher: the
# compile workers (Inductor's sidecars and their forks, ccpool's workers, a
# multiprocessing resource tracker). Ranks and launchers are recognized by
# their command line (the rank scripts and torch.distributed.run).
RANK_SCRIPTS = ("model.py", "inductor_ranks.py", "graph_ranks.py")


def age_s(pid):
    """Seconds since the process started, or None once it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
    except (OSError, IndexError, ValueError):
        return None
    if fields[0] == "Z":
        return None
    return uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK")


def is_python_compile_process(pid, name):
    """A live Python process older than 0.25 s: a process forked by a worker
    to exec ptxas carries the worker's name and command line for a moment,
    and an exiting rank is a zombie without one; neither is a compile
    process."""
    if not name or not name.startswith("python"):
        return False
    age = age_s(pid)
    if age is None or age < 0.25:
        return False
    args = cmdline(pid)
    if not args:
        return False
    if any(os.path.basename(a) in RANK_SCRIPTS for a in args):
        return False
    return not any(a in ("torch.distributed.run", "accelerate") or a.endswith("/torchrun")
                   for a in args)


class ProcessWatch:
    """Samples every 20 ms, until stop(): the pids under `roots()` (all ever
    seen), the peak number of compiler processes among them and the peak
    number (and summed RSS) of Python compile processes. Sampling can miss a
    short peak but never invents one: a bound it reports broken is broken."""

    def __init__(self, roots):
        self.roots = roots
        self.seen = {}
        self.peak_compilers = 0  # compiler jobs (drivers), see is_compiler_job
        self.peak_python_workers = 0  # see is_python_compile_process
        self.peak_python_workers_rss_kb = 0
        self.python_workers_seen = {}  # pid -> command line, of is_python_compile_process
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self):
        while not self._stop.is_set():
            live = []
            for root in self.roots():
                live += descendants(root)
            compilers = workers = workers_rss = 0
            for pid in live:
                name = proc_name(pid)
                if name is None:
                    continue
                self.seen.setdefault(pid, name)
                compilers += is_compiler_job(pid, name)
                if is_python_compile_process(pid, name):
                    workers += 1
                    if pid not in self.python_workers_seen:
                        self.python_workers_seen[pid] = " ".join(cmdline(pid))[:160]
                    workers_rss += rss_kb(pid)
            self.peak_compilers = max(self.peak_compilers, compilers)
            self.peak_python_workers = max(self.peak_python_workers, workers)
            self.peak_python_workers_rss_kb = max(self.peak_python_workers_rss_kb, workers_rss)
            time.sleep(0.02)

    def stop(self):
        self._stop.set()
        self._thread.join(10)


class TorchCase(E2ECase):
    def setUp(self):
        super().setUp()
        failed = os.path.join(VENV, "ccpool-venv-failed")
        if os.path.exists(failed):
            with open(failed) as f:
                self.skipTest(f"the torch venv {VENV} could not be built: {f.read().strip()}")
        if not os.access(VENV_PY, os.X_OK):
            self.skipTest(f"no torch venv at {VENV} (scripts/setup-deps.sh creates it; "
                          "CCPOOL_VENV names another)")
        self.exec_log = self.path("exec.log")
        self.tmp = self.path("tmp")
        os.makedirs(self.tmp)
        self.env.update(
            PATH=f"{VENV}/bin:/usr/local/bin:/usr/bin:/bin",
            TMPDIR=self.tmp,  # Inductor's precompiled headers live in $TMPDIR/torchinductor_$USER
            TORCHINDUCTOR_CACHE_DIR=self.path("inductor"),
            TRITON_CACHE_DIR=self.path("triton"),
            PYTHONPATH=HERE,  # sitecustomize.py: the exec log
            CCPOOL_TORCH_EXECLOG=self.exec_log,
            PYTHONDONTWRITEBYTECODE="1",
            OMP_NUM_THREADS="1",
        )
        # model.py's device: on a GPU machine, CCPOOL_TEST_TORCH_DEVICE=cuda runs the cases that use it
        # on the GPU (their counts hold there too); unset, Inductor's CPU backend, as in CI.
        if os.environ.get("CCPOOL_TEST_TORCH_DEVICE"):
            self.env["CCPOOL_TEST_TORCH_DEVICE"] = os.environ["CCPOOL_TEST_TORCH_DEVICE"]
        self.watch = None

    def tearDown(self):
        if self.watch:
            self.watch.stop()
        super().tearDown()

    # --- running -------------------------------------------------------------
    def ccpool_run(self, *args, jobs=2, flags=(), env=None):
        cmd = [CCPOOL, "run", "--socket", self.sock, "--dir", self.store, "--jobs", str(jobs),
               *flags, "--", *args]
        p = self._run(cmd, env=env)
        return p

    def finish_run(self, p, guard=RUN_GUARD_S):
        try:
            out, err = p.communicate(timeout=guard)
        except subprocess.TimeoutExpired:
            p.kill()
            raise AssertionError(f"{p.args} still running after {guard} s")
        return p.returncode, out.decode(errors="replace"), err.decode(errors="replace")

    def run_ok(self, p):
        rc, out, err = self.finish_run(p)
        self.assertEqual(rc, 0, f"{p.args} exited {rc}\nstdout:\n{out[-4000:]}\nstderr:\n{err[-8000:]}")
        return out, err

    def watch_job(self, job):
        """Starts sampling `job`'s tree and the service's children."""
        def roots():
            return [job.pid] + serve_pids(self.sock)
        self.watch = ProcessWatch(roots)
        return self.watch

    def model_results(self, out_dir, ranks):
        results = []
        for r in range(ranks):
            with open(os.path.join(out_dir, f"rank{r}.json")) as f:
                results.append(json.load(f))
        return results

    # --- the exec log ----------------------------------------------------------
    def execs(self):
        entries = []
        try:
            with open(self.exec_log) as f:
                for line in f:
                    entries.append(json.loads(line))
        except FileNotFoundError:
            pass
        return entries

    @staticmethod
    def is_probe(argv):
        """Compiler runs that are not builds (never cacheable by design)."""
        return any(a in ("--version", "-v", "-E", "-dumpversion", "-dumpmachine") for a in argv[1:])

    def compiler_execs(self, tool_basenames=("g++", "gcc", "c++", "cc")):
        return [e for e in self.execs() if os.path.basename(e["argv"][0]) in tool_basenames]

    def status_summary(self):
        s = self.status()
        keys = ("requests", "hits", "misses", "joins", "executions", "passthrough", "not_stored",
                "failures", "fallbacks", "peak_running")
        return {k: s.get(k) for k in keys}

    def service_log(self):
        try:
            with open(os.path.join(self.run_dir, "ccpool.log")) as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def not_stored_reasons(self):
        return [l.split("not storing", 1)[1].strip() for l in self.service_log().splitlines()
                if "not storing" in l]

    def files_under(self, root, suffixes):
        found = {}
        for d, _, names in os.walk(root):
            for n in names:
                if n.endswith(suffixes):
                    p = os.path.join(d, n)
                    with open(p, "rb") as f:
                        found[os.path.relpath(p, root)] = f.read()
        return found

    def stop_service(self):
        stop_with_cli(self.sock, self.env)
