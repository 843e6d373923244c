"""Shared pieces of scripts/bench.sh: the /proc sampler, timed runs with CPU
accounting, and the five contenders (plain, capped, ccache, sccache, ccpool).

CPU seconds of a run = getrusage(RUSAGE_CHILDREN) of this driver (every
compiler the run's own processes reaped) + the growth of utime+stime+cutime+
cstime of the contender's server process (sccache's server and ccpool's service
run the compilers outside our process tree)."""
import json
import os
import resource
import shutil
import subprocess
import threading
import time

PY = "/usr/bin/python3"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
COMPILERS = {"cc1", "cc1plus"}
SCCACHE_PORT = "4237"  # not sccache's default 4226: never talk to someone else's server


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Sampler(threading.Thread):
    """Samples /proc every `interval` s for cc1/cc1plus processes whose command
    line contains `marker` (our work dir: other users' builds on a shared
    machine are not counted). Counts distinct pids, peak concurrency and peak
    summed RSS (the compiler proper is where the memory goes)."""

    def __init__(self, marker, interval=0.025):
        super().__init__(daemon=True)
        self.marker, self.interval = marker.encode(), interval
        self.stop_event = threading.Event()
        self.seen, self.peak_n, self.peak_rss = set(), 0, 0
        self.not_ours = set()

    def sample(self):
        n, rss = 0, 0
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or pid in self.not_ours:
                continue
            try:
                with open(f"/proc/{pid}/stat", "rb") as f:
                    stat = f.read()
                comm = stat[stat.index(b"(") + 1:stat.rindex(b")")].decode()
                if comm not in COMPILERS:
                    continue
                if pid not in self.seen:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        if self.marker not in f.read():
                            self.not_ours.add(pid)
                            continue
                    self.seen.add(pid)
                n += 1
                rss += int(stat[stat.rindex(b")") + 2:].split()[21]) * PAGE
            except (OSError, ValueError, IndexError):
                continue
        self.peak_n, self.peak_rss = max(self.peak_n, n), max(self.peak_rss, rss)

    def run(self):
        while not self.stop_event.is_set():
            self.sample()
            time.sleep(self.interval)

    def result(self):
        self.stop_event.set()
        self.join()
        return {"compilers_seen": len(self.seen), "peak_concurrent": self.peak_n,
                "peak_rss_bytes": self.peak_rss}


def proc_cpu(pid):
    """utime+stime+cutime+cstime of a live process, in seconds (0 if gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
        fields = s[s.rindex(")") + 2:].split()
        return sum(int(x) for x in fields[11:15]) / TICK
    except (OSError, ValueError):
        return 0.0


def proc_rss(pid):
    """(VmRSS, VmHWM) in bytes of a live process."""
    out = {"VmRSS": 0, "VmHWM": 0}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k = line.split(":")[0]
                if k in out:
                    out[k] = int(line.split()[1]) * 1024
    except OSError:
        pass
    return out["VmRSS"], out["VmHWM"]


def find_pid(comm, environ_needle):
    """The pid of a process named `comm` whose environment contains the needle."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() != comm:
                    continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                if environ_needle.encode() in f.read():
                    return int(pid)
        except OSError:
            continue
    return None


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(cmd, env=None, cwd=None, check=True, quiet=True):
    full_env = dict(os.environ)
    full_env.update(env or {})
    r = subprocess.run(cmd, env=full_env, cwd=cwd, stdout=subprocess.PIPE if quiet else None,
                       stderr=subprocess.STDOUT if quiet else None)
    if check and r.returncode != 0:
        out = r.stdout.decode(errors="replace")[-4000:] if quiet else ""
        raise RuntimeError(f"command failed ({r.returncode}): {' '.join(cmd)}\n{out}")
    return r


def du(path):
    total = 0
    for d, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(d, f)).st_size
            except OSError:
                pass
    return total


def machine_info(ccpool):
    def first_line(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True).stdout.splitlines()[0].strip()
        except (OSError, IndexError):
            return "missing"
    mem = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) * 1024
    model = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "cores": len(os.sched_getaffinity(0)), "cpu": model, "mem_bytes": mem,
        "kernel": os.uname().release, "load_at_start": os.getloadavg(),
        "gxx": first_line(["g++", "--version"]), "ccache": first_line(["ccache", "--version"]),
        "sccache": first_line(["sccache", "--version"]), "hyperfine": first_line(["hyperfine", "--version"]),
        "cmake": first_line(["cmake", "--version"]), "ninja": first_line(["ninja", "--version"]),
        "ccpool_commit": first_line(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def fresh_dir(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def settle(quiet_runnable=2, quiet_for=5, bound_s=180):
    """Waits until the machine is quiet (before each workload, and before
    workload a's warm rows): the runnable threads (/proc/loadavg's 4th field,
    this process included) at most `quiet_runnable` in `quiet_for`
    consecutive 1 s samples, for at most `bound_s` seconds. Workload a's R = 8 cold rows leave a burst of compilers
    behind them that would otherwise land on its warm rows and on workload
    b's latencies. Returns what it waited and the load it found."""
    start, quiet = time.monotonic(), 0
    load_before = os.getloadavg()[0]
    while quiet < quiet_for and time.monotonic() - start < bound_s:
        with open("/proc/loadavg") as f:
            runnable = int(f.read().split()[3].split("/")[0])
        quiet = quiet + 1 if runnable <= quiet_runnable else 0
        time.sleep(1)
    waited = round(time.monotonic() - start, 1)
    return {"waited_s": waited, "quiet": quiet >= quiet_for, "load1_before": load_before,
            "load1_after": os.getloadavg()[0]}
