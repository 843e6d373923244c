#!/usr/bin/env python3
"""Chaos soak (issue 23): a multi-rank job runs under `ccpool run` while a
fault driver, for a bounded time, kill -9s the service, restarts redis-server
(the cluster tier is on), fills the store's disk (a small tmpfs: ENOSPC) and
stalls the service (SIGSTOP, then SIGCONT), one fault every few seconds.

The job is the multi-rank workload of scripts/bench.sh (R ranks started at
once, each compiling K Inductor-like kernels as one-step `g++ -shared` builds
from a thread pool) plus one compile that fails (its exit status and stderr
must come back as plain g++'s), repeated while the faults run; with --torch,
a real torchrun of tests/torch/support/model.py (2 ranks, torch.compile,
Inductor's remote FX-graph cache through the Redis front) runs beside it.

Afterwards it checks: every output byte-identical to a plain g++ build, every
rank's exit status right, `ccpool cache verify` clean, no process of the job
or of any killed service left, no value read back through the Redis front
other than the one written, and no request waiting longer than the
configured bound for its answer or its decision to compile locally
(CCPOOL_CLIENT_TIMEOUT plus the client's fixed connect and start-up budgets;
a fallback's own local compile, and its wait for one of the node's fallback
slots, is local work, not waiting). It prints the figures
(faults injected, requests served, fallbacks, time lost) and exits 0 when
every check holds, 1 when one fails, 125 when a tool is missing.

  scripts/chaos_soak.py --build build                  # 120 s of faults, R=8, K=16, with torch
  scripts/chaos_soak.py --build build --short          # the CTest form (< 60 s): K=3 small kernels, 12 s, no torch
  scripts/chaos_soak.py --build build --rounds 3 --json soak.json

Runs as root (the tmpfs mount; in a private mount namespace, so nothing is
left mounted) or, failing that, in an unprivileged user namespace.
"""
import argparse
import concurrent.futures
import ctypes
import errno
import filecmp
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
GEN = os.path.join(HERE, "lib", "gen_kernels.py")
MODEL = os.path.join(ROOT, "tests", "torch", "support", "model.py")
PY = "/usr/bin/python3"
NS_MARK = "CCPOOL_SOAK_IN_NAMESPACE"
sys.path.insert(0, os.path.join(ROOT, "tests", "service", "support"))
from service_fixture import serve_daemon  # noqa: E402  (the tests' one way to start a service)
LIGHT_KERNEL = """#include <cstdint>
extern "C" void kernel(const float* in, float* out, int64_t n) {{
  #pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] * {idx}.5f + 1.0f;
}}
"""
BAD_SOURCE = "extern \"C\" int broken( { return 0; }\n"  # a syntax error: g++ exits 1
CLIENT_BUDGETS_S = 2 + 5  # ipc handshake + auto-start budget of ccpool-client (client/)
PR_SET_CHILD_SUBREAPER = 36


def log(msg):
    print(f"[soak {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def skip(why):
    print(f"SKIP: {why}", flush=True)
    sys.exit(125)


# --- one rank and the launcher (run as subprocesses of the job) -------------
def rank_main(args):
    """Compiles every kernel (must succeed) and the bad source (must fail as
    plain g++ does) from a thread pool; records each compile's status and
    wall time; exit 0 iff every status is right."""
    out = args.out
    os.makedirs(out, exist_ok=True)
    srcs = sorted(f for f in os.listdir(args.kernel_dir) if f.endswith(".cpp"))
    expected_bad = json.load(open(args.bad_expect))

    def one(src, dest, want_rc, extra):
        start, t0 = time.time(), time.monotonic()
        p = subprocess.Popen(["g++", src, "-O2", "-shared", "-fPIC", "-fopenmp", *extra, "-o", dest],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _, err = p.communicate()
        return {"src": os.path.basename(src), "rc": p.returncode, "want": want_rc, "pid": p.pid, "start": start,
                "wall_s": time.monotonic() - t0,
                "stderr_ok": want_rc == 0 or err.decode(errors="replace") == expected_bad["stderr"]}

    # Every miss_every-th kernel is built with an unused macro naming the job, so each
    # job misses on some (store and tier writes, leases) and hits on the rest;
    # an unused macro leaves the .so's bytes alone.
    miss = [f"-DCCPOOL_SOAK_JOB={args.job}"]
    with concurrent.futures.ThreadPoolExecutor(args.threads) as pool:
        jobs = [pool.submit(one, os.path.join(args.kernel_dir, s), os.path.join(out, s[:-4] + ".so"), 0,
                            miss if i % args.miss_every == 0 else []) for i, s in enumerate(srcs)]
        jobs.append(pool.submit(one, args.bad, os.path.join(out, "bad.so"), expected_bad["rc"], []))
        results = [j.result() for j in jobs]
    front = front_round_trip(args)
    with open(os.path.join(out, "compiles.json"), "w") as f:
        json.dump({"compiles": results, "front": front}, f)
    return 0 if all(r["rc"] == r["want"] and r["stderr_ok"] for r in results) else 1


def front_round_trip(args):
    """SET and GET a value through the Redis front with redis-py, as
    Inductor's remote cache does. The front may be down (a fault): an error is
    counted, as Inductor would log it; a value read back must be the one written."""
    try:
        import redis  # Debian's python3-redis
    except ImportError:
        return {"skipped": "python3-redis is missing"}
    key, value = f"soak:{args.job}:{os.environ.get('RANK')}", os.urandom(4096)
    try:
        r = redis.Redis(unix_socket_path=args.front, socket_timeout=20)
        r.set(key, value, ex=3600)
        got = r.get(key)
        return {"ok": int(got == value), "mismatch": int(got is not None and got != value), "errors": 0}
    except (redis.exceptions.RedisError, OSError):
        return {"ok": 0, "mismatch": 0, "errors": 1}
    except AttributeError as e:
        # redis-py 4.1-4.4 (Debian 12's python3-redis is 4.3.4) reports a reset
        # unix-socket connection, what a killed front leaves, as this
        # AttributeError instead of a ConnectionError (redis-py#1902, #2496):
        # the same connection error, worded by a bug. Anything else is ours.
        if "UnixDomainSocketConnection" not in str(e):
            raise
        return {"ok": 0, "mismatch": 0, "errors": 1}


def launch_main(args):
    """R ranks at once, like torchrun; records every rank's exit status."""
    procs = []
    for r in range(args.ranks):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r))
        procs.append(subprocess.Popen([PY, os.path.abspath(__file__), "--rank", "--kernel-dir", args.kernel_dir,
                                       "--bad", args.bad, "--bad-expect", args.bad_expect, "--threads",
                                       str(args.threads), "--job", args.job, "--front", args.front,
                                       "--miss-every", str(args.miss_every),
                                       "--out", os.path.join(args.out, f"rank{r}")], env=env))
    statuses = [p.wait() for p in procs]
    with open(os.path.join(args.out, "ranks.json"), "w") as f:
        json.dump(statuses, f)
    return 0 if all(s == 0 for s in statuses) else 1


# --- the soak ---------------------------------------------------------------
def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pid_alive(pid):
    """True while the process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


class Soak:
    def __init__(self, args):
        self.a = args
        self.bin = os.path.abspath(os.path.join(args.build, "bin"))
        self.ccpool = os.path.join(self.bin, "ccpool")
        self.work = args.work or tempfile.mkdtemp(prefix="ccpool-soak.", dir="/tmp")
        self.store = os.path.join(self.work, "store")
        self.run_dir = os.path.join(self.work, "run")
        self.sock = os.path.join(self.run_dir, "sock")
        self.key = os.path.join(self.work, "tier.key")
        self.redis_port = free_port()
        self.redis = None
        self.services_seen = set()
        self.faults = {"kill9_service": 0, "restart_redis": 0, "fill_disk": 0, "enospc_hit": 0, "stall_service": 0}
        self.fault_log = []
        self.compiles_while_full = 0
        self.lock = threading.Lock()
        self.failures = []
        self.stop_faults = threading.Event()
        self.env = self.base_env()

    def base_env(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith("CCPOOL_") and k != "LD_PRELOAD"}
        env.update(PATH="/usr/local/bin:/usr/bin:/bin", CCPOOL_SOCKET=self.sock, CCPOOL_DIR=self.store,
                   CCPOOL_JOBS="2", CCPOOL_REMOTE=f"redis://127.0.0.1:{self.redis_port}",
                   CCPOOL_REMOTE_KEY_FILE=self.key, CCPOOL_NO_AUTOSTART="1",
                   CCPOOL_CLIENT_TIMEOUT=f"{self.a.client_timeout}s", PYTHONDONTWRITEBYTECODE="1",
                   OMP_NUM_THREADS="1")
        return env

    def fail(self, what):
        with self.lock:
            self.failures.append(what)
        log(f"CHECK FAILED: {what}")

    # --- set-up ---------------------------------------------------------------
    def setup(self):
        os.makedirs(self.store, mode=0o700, exist_ok=True)
        os.makedirs(self.run_dir, mode=0o700, exist_ok=True)
        os.chmod(self.work, 0o700)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.a.store_mb}m,mode=0700", "tmpfs", self.store],
                           capture_output=True, text=True)
        if r.returncode != 0:
            skip(f"cannot mount a {self.a.store_mb} MiB tmpfs for the store: {r.stderr.strip()}")
        with open(os.open(self.key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
            f.write("chaos-soak-shared-hmac-key-0123456789\n")
        self.kernels = os.path.join(self.work, "kernels")
        if self.a.light:
            # The same job shape with small sources: a compile takes a tenth of a gen_kernels one.
            os.makedirs(self.kernels)
            for i in range(self.a.kernels):
                with open(os.path.join(self.kernels, f"kernel_{i:03d}.cpp"), "w") as f:
                    f.write(LIGHT_KERNEL.format(idx=i))
        else:
            subprocess.run([PY, GEN, self.kernels, str(self.a.kernels)], check=True, stdout=subprocess.DEVNULL)
        self.bad = os.path.join(self.work, "bad", "bad.cpp")
        os.makedirs(os.path.dirname(self.bad))
        with open(self.bad, "w") as f:
            f.write(BAD_SOURCE)
        # The plain build: the reference bytes, the bad compile's status and stderr.
        self.ref = os.path.join(self.work, "ref")
        os.makedirs(self.ref)
        slowest = 0.0
        for src in sorted(os.listdir(self.kernels)):
            t0 = time.monotonic()
            subprocess.run(["g++", os.path.join(self.kernels, src), "-O2", "-shared", "-fPIC", "-fopenmp", "-o",
                            os.path.join(self.ref, src[:-4] + ".so")], check=True)
            slowest = max(slowest, time.monotonic() - t0)
        bad = subprocess.run(["g++", self.bad, "-O2", "-shared", "-fPIC", "-fopenmp", "-o",
                              os.path.join(self.ref, "bad.so")], capture_output=True)
        self.bad_expect = os.path.join(self.work, "bad", "expect.json")
        with open(self.bad_expect, "w") as f:
            json.dump({"rc": bad.returncode, "stderr": bad.stderr.decode(errors="replace")}, f)
        if bad.returncode == 0:
            raise SystemExit("the deliberately bad kernel compiled; fix BAD_SOURCE")
        self.slowest_plain_s = slowest
        # The configured bound: CCPOOL_CLIENT_TIMEOUT for the reply, plus the
        # client's fixed connect and start-up budgets, plus 1 s of slack.
        self.wait_bound_s = self.a.client_timeout + CLIENT_BUDGETS_S + 1
        self.start_redis()
        self.start_service()

    def start_redis(self):
        os.makedirs(os.path.join(self.work, "redis"), exist_ok=True)
        self.redis = subprocess.Popen(["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1",
                                       "--save", "", "--appendonly", "no", "--dir", os.path.join(self.work, "redis")],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.redis_port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        self.fail("redis-server did not come up")

    def service_pid(self):
        try:
            with open(os.path.join(self.run_dir, "serve.pid")) as f:
                pid = int(f.read().strip())
        except (OSError, ValueError):
            return None
        return pid if pid_alive(pid) else None

    def start_service(self):
        """What a restart policy does (systemd Restart=, a DaemonSet): start
        `ccpool serve` (it daemonizes; a second one exits at once while
        another instance holds the lock, e.g. one `ccpool run` started)."""
        pid = serve_daemon(self.sock, self.store, self.env, "--jobs", "2", "--resp-threads", "2",
                           ccpool=self.ccpool)
        if pid:
            self.services_seen.add(pid)
        return pid

    def reap_services(self):
        """We are the child subreaper: daemonized services land here."""
        for pid in list(self.services_seen):
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass

    # --- faults ---------------------------------------------------------------
    def note(self, kind, detail=""):
        with self.lock:
            self.faults[kind] += 1
            self.fault_log.append((round(time.monotonic() - self.t0, 2), kind, detail))

    def fault_kill9(self):
        pid = self.service_pid()
        if not pid:
            return
        os.kill(pid, signal.SIGKILL)
        self.note("kill9_service", str(pid))
        for _ in range(200):
            self.reap_services()
            if not pid_alive(pid):
                break
            time.sleep(0.01)
        time.sleep(self.a.down_s)  # clients fall back meanwhile
        self.services_seen.add(self.start_service() or 0)
        self.services_seen.discard(0)

    def fault_restart_redis(self):
        self.redis.kill()
        self.redis.wait()
        self.note("restart_redis")
        time.sleep(self.a.down_s)
        self.start_redis()

    def fault_fill_disk(self):
        filler = os.path.join(self.store, "filler")
        hit = False
        try:
            with open(filler, "wb") as f:
                chunk = b"\0" * (1 << 20)
                while True:
                    f.write(chunk)
                    f.flush()
        except OSError as e:
            hit = e.errno == errno.ENOSPC
        self.note("fill_disk")
        if hit:
            self.note("enospc_hit")
        # A new compile while the disk is full: the store must refuse it, the compile must not fail.
        t0 = time.monotonic()
        self.compile_while_full()
        time.sleep(max(0.0, self.a.hold_s - (time.monotonic() - t0)))
        os.unlink(filler)

    def compile_while_full(self):
        n = self.faults["fill_disk"]
        src = os.path.join(self.kernels, sorted(os.listdir(self.kernels))[0])
        out = os.path.join(self.work, "full", f"{n}.so")
        os.makedirs(os.path.dirname(out), exist_ok=True)
        r = subprocess.run([self.ccpool, "exec", "--socket", self.sock, "--", "g++", src, "-O2", "-shared", "-fPIC",
                            "-fopenmp", f"-DCCPOOL_SOAK_FULL={n}", "-o", out], env=self.env, capture_output=True,
                           timeout=120)
        ref = os.path.join(self.ref, os.path.basename(src)[:-4] + ".so")
        if r.returncode != 0 or not filecmp.cmp(out, ref, shallow=False):
            self.fail(f"a compile while the store's disk was full: exit {r.returncode}, "
                      f"{r.stderr.decode(errors='replace')[-500:]}")
        with self.lock:
            self.compiles_while_full += 1

    def fault_stall(self):
        pid = self.service_pid()
        if not pid:
            return
        os.kill(pid, signal.SIGSTOP)
        self.note("stall_service", str(pid))
        time.sleep(self.a.stall_s)
        os.kill(pid, signal.SIGCONT)

    def fault_driver(self):
        cycle = [self.fault_kill9, self.fault_restart_redis, self.fault_fill_disk, self.fault_stall]
        i = 0
        end = time.monotonic() + self.a.seconds
        while time.monotonic() < end and not self.stop_faults.is_set():
            cycle[i % len(cycle)]()
            i += 1
            self.reap_services()
            self.stop_faults.wait(self.a.every)
        self.stop_faults.set()

    # --- the job --------------------------------------------------------------
    def run_job(self, tag):
        out = os.path.join(self.work, "out", tag)
        cmd = [self.ccpool, "run", "--socket", self.sock, "--dir", self.store, "--jobs", "2", "--ranks",
               str(self.a.ranks), "--", PY, os.path.abspath(__file__), "--launch", "--ranks", str(self.a.ranks),
               "--kernel-dir", self.kernels, "--bad", self.bad, "--bad-expect", self.bad_expect, "--threads",
               str(self.a.threads), "--job", tag, "--front", os.path.join(self.run_dir, "resp.sock"),
               "--miss-every", str(self.a.miss_every), "--out", out]
        t0 = time.monotonic()
        r = subprocess.run(cmd, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=self.a.seconds + 600)
        wall = time.monotonic() - t0
        return self.check_job(tag, out, r, wall)

    def fallback_times(self):
        """pid -> unix seconds of each client-side fallback (fallbacks.log:
        time, pid, reason, program). The client is the compile's own process
        (the shim execs it in place of g++), so the pid is the rank's Popen pid."""
        times = {}
        try:
            with open(os.path.join(self.run_dir, "fallbacks.log")) as f:
                for line in f:
                    parts = line.split("\t")
                    if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
                        times.setdefault(int(parts[1]), []).append(int(parts[0]))
        except OSError:
            pass
        return times

    def check_job(self, tag, out, r, wall):
        row = {"tag": tag, "rc": r.returncode, "wall_s": round(wall, 2), "identical": 0, "different": 0,
               "missing": 0, "compiles": 0, "fallbacks": 0, "over_bound": 0, "max_wait_s": 0.0, "wrong_status": 0,
               "front_ok": 0, "front_errors": 0, "front_mismatch": 0}
        try:
            statuses = json.load(open(os.path.join(out, "ranks.json")))
        except (OSError, ValueError):
            statuses = None
        if r.returncode != 0 or statuses != [0] * self.a.ranks:
            self.fail(f"job {tag}: ccpool run exited {r.returncode}, rank statuses {statuses}: "
                      f"{r.stdout.decode(errors='replace')[-1500:]}")
        fallbacks = self.fallback_times()
        for rank in range(self.a.ranks):
            d = os.path.join(out, f"rank{rank}")
            for f in sorted(os.listdir(self.ref)):
                if f == "bad.so":
                    continue
                p = os.path.join(d, f)
                if not os.path.exists(p):
                    row["missing"] += 1
                elif filecmp.cmp(p, os.path.join(self.ref, f), shallow=False):
                    row["identical"] += 1
                else:
                    row["different"] += 1
            try:
                record = json.load(open(os.path.join(d, "compiles.json")))
            except (OSError, ValueError):
                record = {"compiles": [], "front": {}}
            for c in record["compiles"]:
                row["compiles"] += 1
                # How long the request waited before it was answered or went its own way:
                # a fallback's local run (and its wait for a node-wide fallback slot) is not
                # waiting for the service. fallbacks.log has 1 s resolution.
                ts = [t for t in fallbacks.get(c["pid"], []) if int(c["start"]) - 1 <= t <= c["start"] + c["wall_s"] + 1]
                waited = max(0.0, ts[0] + 1 - c["start"]) if ts else c["wall_s"]
                row["fallbacks"] += bool(ts)
                row["max_wait_s"] = max(row["max_wait_s"], round(waited, 2))
                row["over_bound"] += waited > self.wait_bound_s
                row["wrong_status"] += c["rc"] != c["want"] or not c["stderr_ok"]
            for k in ("ok", "errors", "mismatch"):
                row[f"front_{k}"] += record["front"].get(k, 0)
        if row["different"] or row["missing"]:
            self.fail(f"job {tag}: {row['different']} outputs differ from the plain build, {row['missing']} missing")
        if row["wrong_status"]:
            self.fail(f"job {tag}: {row['wrong_status']} compiles returned another status or stderr than plain g++")
        if row["over_bound"]:
            self.fail(f"job {tag}: {row['over_bound']} requests waited longer than {self.wait_bound_s:.1f} s")
        if row["front_mismatch"]:
            self.fail(f"job {tag}: {row['front_mismatch']} values read back through the Redis front differ")
        expected = self.a.ranks * (self.a.kernels + 1)
        if row["compiles"] != expected:
            self.fail(f"job {tag}: {row['compiles']} compiles recorded, {expected} expected")
        shutil.rmtree(out, ignore_errors=True)
        return row

    def torch_loop(self):
        """torchrun of the torch test model, again and again during the faults."""
        venv_py = os.path.join(self.a.venv, "bin", "python")
        runs = []
        n = 0
        while not self.stop_faults.is_set() or n == 0:
            out = os.path.join(self.work, "torch", f"run{n}")
            env = dict(self.env, PATH=f"{self.a.venv}/bin:" + self.env["PATH"],
                       TORCHINDUCTOR_CACHE_DIR=os.path.join(self.work, "torch", f"inductor{n}"),
                       TMPDIR=os.path.join(self.work, "torch", f"tmp{n}"))
            os.makedirs(env["TMPDIR"], exist_ok=True)
            cmd = [self.ccpool, "run", "--socket", self.sock, "--dir", self.store, "--jobs", "2",
                   "--frameworks-cache", "--", venv_py, "-m", "torch.distributed.run", "--standalone",
                   "--nproc-per-node", "2", MODEL, "--out-dir", out]
            t0 = time.monotonic()
            r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=900)
            ok = r.returncode == 0
            for rank in range(2):
                try:
                    res = json.load(open(os.path.join(out, f"rank{rank}.json")))
                    ok = ok and all(res["ok"].values()) and res["ranks_agree"]
                except (OSError, ValueError, KeyError):
                    ok = False
            runs.append({"rc": r.returncode, "ok": ok, "wall_s": round(time.monotonic() - t0, 1)})
            if not ok:
                self.fail(f"torchrun {n}: exit {r.returncode}: {r.stdout.decode(errors='replace')[-1500:]}")
            n += 1
        self.torch_runs = runs

    # --- afterwards -----------------------------------------------------------
    def leftovers(self):
        """Processes still running that belong to the job or a service: any
        whose command line or cwd names the work directory, but us."""
        me = os.getpid()
        left = []
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == me:
                continue
            pid = int(name)
            try:
                cmdline = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
                cwd = os.readlink(f"/proc/{pid}/cwd")
            except OSError:
                continue
            if (self.work in cmdline or cwd.startswith(self.work)) and pid_alive(pid):
                left.append(f"{pid}: {cmdline[:160]}")
        return left

    def finish(self):
        # The last instance ends cleanly; every instance ever seen must be gone.
        if not self.service_pid():
            self.start_service()
        status = subprocess.run([self.ccpool, "status", "--socket", self.sock, "--json"], env=self.env,
                                capture_output=True, timeout=60)
        self.last_status = json.loads(status.stdout) if status.returncode == 0 else {}
        subprocess.run([self.ccpool, "stop", "--socket", self.sock], env=self.env, capture_output=True, timeout=120)
        for _ in range(600):
            self.reap_services()
            if not any(pid_alive(p) for p in self.services_seen):
                break
            time.sleep(0.05)
        alive = [p for p in self.services_seen if pid_alive(p)]
        if alive:
            self.fail(f"service processes still running after stop: {alive}")
        verify = subprocess.run([self.ccpool, "cache", "verify", "--dir", self.store, "--json"], env=self.env,
                                capture_output=True, text=True, timeout=600)
        self.verify = verify.stdout.strip()
        try:
            v = json.loads(verify.stdout)
        except ValueError:
            v = None
        if verify.returncode != 0 or not v or v.get("corrupt") != [] or v.get("checked_entries", 0) == 0:
            self.fail(f"ccpool cache verify is not clean (exit {verify.returncode}): {verify.stdout} {verify.stderr}")
        self.redis.kill()
        self.redis.wait()
        left = self.leftovers()
        if left:
            self.fail(f"{len(left)} processes of the job or a service left: {left[:5]}")
        try:
            with open(os.path.join(self.run_dir, "fallbacks.log")) as f:
                self.fallbacks = sum(1 for line in f if line.strip())
        except OSError:
            self.fallbacks = 0
        try:
            with open(os.path.join(self.run_dir, "ccpool.log")) as f:
                service_log = f.read()
        except OSError:
            service_log = ""
        # Writes the full disk refused, as the services logged them (their counters die with kill -9).
        self.store_writes_refused = service_log.count("disk full while writing the store")

    def run(self):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        self.setup()
        self.t0 = time.monotonic()
        jobs = [self.run_job("cold")]
        jobs.append(self.run_job("baseline"))
        baseline = jobs[-1]["wall_s"]
        log(f"cold {jobs[0]['wall_s']} s, warm baseline {baseline} s; faults for {self.a.seconds} s, "
            f"one every {self.a.every} s; wait bound {self.wait_bound_s:.1f} s")
        driver = threading.Thread(target=self.fault_driver)
        self.torch_runs = []
        torch_thread = threading.Thread(target=self.torch_loop) if self.a.torch else None
        window_start = time.monotonic()
        driver.start()
        if torch_thread:
            torch_thread.start()
        i = 0
        while not self.stop_faults.is_set():
            jobs.append(self.run_job(f"fault{i}"))
            log(f"job fault{i}: {jobs[-1]['wall_s']} s, max wait {jobs[-1]['max_wait_s']} s")
            i += 1
        driver.join()
        if torch_thread:
            torch_thread.join()
        window_s = time.monotonic() - window_start
        if self.service_pid() is None:
            self.start_service()
        jobs.append(self.run_job("after"))
        self.finish()
        under_faults = [j for j in jobs if j["tag"].startswith("fault")]
        compiles = sum(j["compiles"] for j in jobs)
        fallbacks_ranks = sum(j["fallbacks"] for j in jobs)
        summary = {
            "fault_seconds": self.a.seconds, "window_s": round(window_s, 1), "ranks": self.a.ranks,
            "kernels": self.a.kernels,
            "faults": dict(self.faults), "jobs": len(jobs), "jobs_under_faults": len(under_faults),
            # The ranks' compiles; the torch job's compiles are not counted here, but its
            # fallbacks are in fallbacks.log too (fallbacks_torch).
            "compile_requests": compiles, "fallbacks": fallbacks_ranks,
            "served_by_service": compiles - fallbacks_ranks, "fallbacks_torch": self.fallbacks - fallbacks_ranks,
            "slowest_plain_compile_s": round(self.slowest_plain_s, 2),
            "front_round_trips": {k: sum(j[f"front_{k}"] for j in jobs) for k in ("ok", "errors", "mismatch")},
            "baseline_job_s": baseline,
            "time_lost_s": round(sum(max(0.0, j["wall_s"] - baseline) for j in under_faults), 1),
            "max_wait_s": max(j["max_wait_s"] for j in jobs), "wait_bound_s": round(self.wait_bound_s, 1),
            "outputs_identical": sum(j["identical"] for j in jobs),
            "outputs_different_or_missing": sum(j["different"] + j["missing"] for j in jobs),
            "store_writes_refused_enospc": self.store_writes_refused, "compiles_while_disk_full": self.compiles_while_full,
            "torch_runs": self.torch_runs, "services_seen": len(self.services_seen),
            "cache_verify": self.verify, "failures": self.failures, "fault_log": self.fault_log,
        }
        return summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--short", action="store_true", help="the CTest form: K=3 small kernels, 12 s of faults, no torch")
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--every", type=float, default=4.0, help="seconds between faults")
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--kernels", type=int, default=16)
    ap.add_argument("--threads", type=int, default=4, help="compile threads per rank")
    ap.add_argument("--light", action="store_true", help="small kernel sources instead of gen_kernels.py's")
    ap.add_argument("--miss-every", type=int, default=2,
                    help="every Nth kernel is a new compile in each job (the rest hit)")
    ap.add_argument("--torch", dest="torch", action="store_true", default=None)
    ap.add_argument("--no-torch", dest="torch", action="store_false")
    ap.add_argument("--venv", default=None)
    ap.add_argument("--store-mb", type=int, default=64)
    ap.add_argument("--client-timeout", type=int, default=30, help="CCPOOL_CLIENT_TIMEOUT, seconds")
    ap.add_argument("--stall-s", type=float, default=2.0)
    ap.add_argument("--hold-s", type=float, default=4.0, help="how long the store's disk stays full")
    ap.add_argument("--down-s", type=float, default=1.0, help="how long a killed service or Redis stays down")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--json", default=None)
    ap.add_argument("--work", default=None)
    ap.add_argument("--keep", action="store_true")
    # internal: the job's launcher and ranks
    ap.add_argument("--launch", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--kernel-dir", help=argparse.SUPPRESS)
    ap.add_argument("--bad", help=argparse.SUPPRESS)
    ap.add_argument("--bad-expect", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--job", help=argparse.SUPPRESS)
    ap.add_argument("--front", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rank:
        sys.exit(rank_main(args))
    if args.launch:
        sys.exit(launch_main(args))
    if args.short:
        args.seconds, args.every, args.kernels, args.threads, args.stall_s, args.hold_s = 12, 0.8, 3, 2, 1.0, 2.0
        args.down_s, args.client_timeout, args.miss_every, args.light = 0.3, 10, 3, True
        args.torch = False if args.torch is None else args.torch
    args.venv = args.venv or os.environ.get("CCPOOL_VENV") or os.path.join(args.build, "venv")
    if args.torch is None:
        args.torch = os.access(os.path.join(args.venv, "bin", "python"), os.X_OK)
    for tool in ("g++", "redis-server", "mount"):
        if shutil.which(tool) is None:
            skip(f"{tool} is not installed (scripts/setup-deps.sh installs it)")
    if not os.access(os.path.join(args.build, "bin", "ccpool"), os.X_OK):
        raise SystemExit(f"no ccpool in {args.build}/bin: build first (cmake --build {args.build})")
    if os.environ.get(NS_MARK) != "1":
        # A private mount namespace: the tmpfs store vanishes with us, whatever happens.
        ns = ["unshare", "--mount", "--propagation", "private"] if os.geteuid() == 0 else \
             ["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private"]
        if shutil.which("unshare") is None:
            skip("unshare (util-linux) is not installed")
        probe = subprocess.run([*ns, "true"], capture_output=True, text=True)
        if probe.returncode != 0:
            skip(f"cannot make a private mount namespace for the tmpfs store ({' '.join(ns)}): "
                 f"{probe.stderr.strip()}; run as root")
        os.environ[NS_MARK] = "1"
        os.execvp(ns[0], [*ns, PY, os.path.abspath(__file__), *sys.argv[1:]])
    summaries = []
    ok = True
    for n in range(args.rounds):
        log(f"round {n + 1} of {args.rounds}")
        soak = Soak(args)
        try:
            summary = soak.run()
        finally:
            subprocess.run(["umount", "-l", soak.store], capture_output=True)
            if soak.redis and soak.redis.poll() is None:
                soak.redis.kill()
            if not args.keep and not soak.failures:
                shutil.rmtree(soak.work, ignore_errors=True)
        summaries.append(summary)
        brief = {k: v for k, v in summary.items() if k not in ("fault_log",)}
        print(json.dumps(brief, indent=1), flush=True)
        if summary["failures"]:
            ok = False
            log(f"round {n + 1}: {len(summary['failures'])} check(s) failed; work dir kept: {soak.work}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summaries, f, indent=1)
    log("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
