"""The five contenders. Each knows how to start cold (an empty cache and, for
the servers, a fresh server), how a compiler command reaches it (a CXX wrapper,
a CMake compiler launcher, or `ccpool run` around the whole command), which
process outside our tree runs its compilers (for CPU accounting), and its own
counters (ccache --print-stats, sccache --show-stats, ccpool status)."""
import json
import os
import subprocess
import time

from common import SCCACHE_PORT, fresh_dir, run, find_pid


class Contender:
    name = "?"
    caches = False

    def __init__(self, ctx):
        self.ctx = ctx
        self.base = os.path.join(ctx.work, "contenders", self.name)
        os.makedirs(self.base, exist_ok=True)

    def reset(self):
        """Makes the next run cold."""

    def wrap(self, cmd, ranks=None):
        return cmd

    def env(self):
        return {}

    def cxx(self):
        return "g++"

    def launcher(self):
        return None

    def threads(self, default):
        return default

    def server_pid(self):
        return None

    def counters(self):
        return {}

    def stop(self):
        pass


class Plain(Contender):
    name = "plain"


class Capped(Contender):
    """The TORCHINDUCTOR_COMPILE_THREADS=2 workaround: each rank's pool has 2 threads."""
    name = "capped"

    def threads(self, default):
        return 2


def write_wrapper(path, tool):
    with open(path, "w") as f:
        f.write(f'#!/bin/sh\nexec {tool} g++ "$@"\n')
    os.chmod(path, 0o755)
    return path


class Ccache(Contender):
    name = "ccache"
    caches = True

    def __init__(self, ctx):
        super().__init__(ctx)
        self.dir = os.path.join(self.base, "cache")
        self.wrapper = write_wrapper(os.path.join(self.base, "ccache-g++"), "ccache")

    def env(self):
        return {"CCACHE_DIR": self.dir, "CCACHE_MAXSIZE": "20G"}

    def reset(self):
        fresh_dir(self.dir)

    def cxx(self):
        return self.wrapper

    def launcher(self):
        return "ccache"

    def counters(self):
        r = subprocess.run(["ccache", "--print-stats"], env={**os.environ, **self.env()},
                           capture_output=True, text=True)
        out = {}
        for line in r.stdout.splitlines():
            parts = line.split("\t")
            if len(parts) == 2 and parts[1].strip().lstrip("-").isdigit():
                out[parts[0]] = int(parts[1])
        return out


class Sccache(Contender):
    name = "sccache"
    caches = True

    def __init__(self, ctx):
        super().__init__(ctx)
        self.dir = os.path.join(self.base, "cache")
        self.wrapper = write_wrapper(os.path.join(self.base, "sccache-g++"), "sccache")

    def env(self):
        return {"SCCACHE_DIR": self.dir, "SCCACHE_SERVER_PORT": SCCACHE_PORT, "SCCACHE_CACHE_SIZE": "20G",
                "SCCACHE_IDLE_TIMEOUT": "0"}

    def reset(self):
        self.stop()
        fresh_dir(self.dir)
        run(["sccache", "--start-server"], env=self.env())

    def cxx(self):
        return self.wrapper

    def launcher(self):
        return "sccache"

    def server_pid(self):
        return find_pid("sccache", "SCCACHE_DIR=" + self.dir)

    def counters(self):
        r = subprocess.run(["sccache", "--show-stats", "--stats-format", "json"],
                           env={**os.environ, **self.env()}, capture_output=True, text=True)
        try:
            stats = json.loads(r.stdout)["stats"]
        except (ValueError, KeyError):
            return {}

        def total(v):
            return sum(v.get("counts", {}).values()) if isinstance(v, dict) else v
        return {k: total(v) for k, v in stats.items() if isinstance(v, (int, dict))}

    def stop(self):
        subprocess.run(["sccache", "--stop-server"], env={**os.environ, **self.env()}, capture_output=True)


class Ccpool(Contender):
    """`ccpool run` around the whole command; a fresh --dir/--socket per cold run."""
    name = "ccpool"
    caches = True

    def __init__(self, ctx):
        super().__init__(ctx)
        self.generation = 0
        self.socket = self.dir = None

    def reset(self):
        self.stop()
        self.generation += 1
        root = fresh_dir(os.path.join(self.base, f"g{self.generation}"))
        self.socket = os.path.join(root, "run", "sock")
        self.dir = os.path.join(root, "store")
        os.makedirs(os.path.dirname(self.socket))

    def wrap(self, cmd, ranks=None):
        pre = [self.ctx.ccpool, "run", "--socket", self.socket, "--dir", self.dir]
        if ranks:
            pre += ["--ranks", str(ranks)]
        return pre + ["--"] + cmd

    def server_pid(self):
        try:
            with open(os.path.join(os.path.dirname(self.socket), "serve.pid")) as f:
                pid = int(f.read().split()[0])
            os.kill(pid, 0)
            return pid
        except (OSError, ValueError, IndexError, TypeError):
            return None

    def counters(self):
        if self.server_pid() is None:
            return {}
        r = subprocess.run([self.ctx.ccpool, "status", "--socket", self.socket, "--json"],
                           capture_output=True, text=True)
        try:
            status = json.loads(r.stdout)
        except ValueError:
            return {}
        out = {k: v for k, v in status.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        # Why-not reasons, flattened so that deltas per build work like the other counters.
        for kind, field in (("passthrough", "passthrough_reasons"), ("not_stored", "not_stored_reasons")):
            for reason, n in (status.get(field) or {}).items():
                out[f"{kind}:{reason}"] = n
        return out

    def store_stats(self):
        r = subprocess.run([self.ctx.ccpool, "cache", "stats", "--dir", self.dir, "--json"],
                           capture_output=True, text=True)
        try:
            return json.loads(r.stdout)
        except ValueError:
            return {"error": r.stdout + r.stderr}

    def logical_by_kind(self):
        """Uncompressed bytes per entry kind (compile results vs manifest blobs)."""
        r = subprocess.run([self.ctx.ccpool, "cache", "ls", "--dir", self.dir, "--json"],
                           capture_output=True, text=True)
        out = {}
        try:
            for e in json.loads(r.stdout):
                kind = "manifests" if e.get("kind") == "blob" else "results"
                out[kind] = out.get(kind, 0) + int(e.get("logical_bytes", 0))
        except (ValueError, TypeError, AttributeError):
            pass
        return out

    def stop(self):
        if self.socket and self.server_pid() is not None:
            subprocess.run([self.ctx.ccpool, "stop", "--socket", self.socket], capture_output=True)
            for _ in range(100):
                if self.server_pid() is None:
                    break
                time.sleep(0.05)


ALL = [Plain, Capped, Ccache, Sccache, Ccpool]


def make_all(ctx, names=None):
    return [c(ctx) for c in ALL if names is None or c.name in names]
