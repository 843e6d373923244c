"""Real-process harness for the cluster tier tests (issue 7, tests/remote_e2e/).

A "node" is one `ccpool serve --foreground` with its own store dir and its own
socket; every node of a test points at one Debian redis-server that the test
starts on a free loopback port with its own dir (`--save "" --appendonly no`).
All nodes' clients run in one shared work dir: generic keys hash the cwd and
the absolute input/output paths, so nodes share results only when paths match
(as on a cluster with identical paths).

Each test gets /tmp/ccpool-tests/remote_e2e.<test>.XXXX, removed on success, kept (and
printed) on failure. tearDown always stops every node (SIGTERM, then SIGKILL),
every auto-started service on a node socket, every pid a tool recorded, and
the redis-server, so cases can run in parallel (`ctest -j2`).

Run one case:  CCPOOL_BIN=<build>/bin /usr/bin/python3 remote_e2e_test.py Class.test_x
Exit codes: 0 pass, 1 fail, 125 skip (no redis-server; CTest SKIP_RETURN_CODE).
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import unittest

REDIS_SERVER = "/usr/bin/redis-server"
HANG_GUARD_S = 90  # generous: only catches hangs, never measures speed
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "service", "support"))
# Shared with tests/service and tests/e2e: paths, kept dirs, the runner (exit 125 on skip), waits.
from harness import (BIN, CCPOOL, TESTS_ROOT, _kept_dirs, clean_env, end_clients, exec_argv,  # noqa: E402,F401
                     main, make_case_dir, pid_gone, serve_pids, wait_until)
from service_fixture import Service, end_services, kill_recorded  # noqa: E402


def free_loopback_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Redis:
    """A private redis-server plus a minimal RESP client (no python3-redis
    needed): planting values, listing keys, reading INFO."""

    def __init__(self, directory):
        self.dir = directory
        self.proc = None
        self.port = None

    def start(self):
        for _ in range(5):
            self.port = free_loopback_port()
            self.log = open(os.path.join(self.dir, "redis.out"), "wb")
            self.proc = subprocess.Popen(
                [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", self.dir, "--daemonize", "no",
                 "--logfile", os.path.join(self.dir, "redis.log")],
                stdout=self.log, stderr=subprocess.STDOUT)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    if self.command("PING") == "PONG":
                        return self
                except OSError:
                    pass
                time.sleep(0.02)
            self.kill()
        raise AssertionError(f"redis-server did not start; see {self.dir}/redis.log")

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}"

    def pause(self):   # SIGSTOP: accepts connections, never answers (slow)
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self):
        self.proc.send_signal(signal.SIGCONT)

    def kill(self):    # SIGKILL: down (connection refused)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(10)

    # --- RESP ------------------------------------------------------------
    def command(self, *args):
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            out = b"*%d\r\n" % len(args)
            for a in args:
                a = a if isinstance(a, bytes) else str(a).encode()
                out += b"$%d\r\n%s\r\n" % (len(a), a)
            s.sendall(out)
            return _read_reply(s.makefile("rb"))

    def keys(self, pattern):
        return sorted(k.decode() for k in self.command("KEYS", pattern))

    def get(self, key):
        return self.command("GET", key)

    def set(self, key, value):
        assert self.command("SET", key, value) == "OK"

    def eval_calls(self):
        """How many EVALs Redis has run: the lease poll is an EVAL every
        poll_interval (50 ms), renewal one per lease per lease_ttl/3."""
        info = self.command("INFO", "commandstats").decode()
        for line in info.splitlines():
            if line.startswith("cmdstat_eval:"):
                return int(line.split("calls=")[1].split(",")[0])
        return 0


def _read_reply(f):
    line = f.readline()
    if not line:
        raise OSError("redis closed the connection")
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        raise AssertionError(f"redis error: {rest.decode()}")
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)
        return data[:-2]
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [_read_reply(f) for _ in range(n)]
    raise OSError(f"bad RESP line {line!r}")


class Node(Service):
    """One simulated node: `ccpool serve` (service_fixture.Service) with its
    own store and socket, on the case's Redis tier unless told otherwise."""

    def __init__(self, case, name):
        self.case = case
        self.name = name
        self.root = case.path(name)
        super().__init__(os.path.join(self.root, "run", "sock"), os.path.join(self.root, "store"), case.env,
                         os.path.join(self.root, "serve.out"), cwd=self.root, what=f"node {name}")

    def start(self, *args, jobs=2, remote=True):
        cmd = []
        if remote:
            cmd += ["--remote", self.case.redis.url]
            if "--remote-key-file" not in args and "--remote-unsigned" not in args:
                cmd += ["--remote-key-file", self.case.shared_key_file()]  # signed, as required
        os.makedirs(self.root, exist_ok=True)
        super().start(*cmd, *args, jobs=jobs)
        return self

    def wait_status(self, predicate, what):
        return super().wait_status(predicate, f"node {self.name}: {what}")

    def spawn(self, program_args, inputs=(), outputs=()):
        env = dict(self.case.env, CCPOOL_NO_AUTOSTART="1")
        p = subprocess.Popen(exec_argv(self.sock, program_args, inputs, outputs), env=env,
                             cwd=self.case.work, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.case.clients.append(p)
        return p

    def stop(self):
        super().stop()
        end_services(self.sock)  # a service auto-started by a fallback


class NodesCase(unittest.TestCase):
    """Base class: a private dir, a private redis-server, nodes on demand."""

    def setUp(self):
        if not os.access(REDIS_SERVER, os.X_OK):
            raise unittest.SkipTest(f"{REDIS_SERVER} is not installed; install Debian's "
                                    "redis-server (scripts/setup-deps.sh does)")
        self.dir = make_case_dir(self, "remote_e2e." + self._testMethodName + ".")
        self.work = self.path("work")
        os.makedirs(self.work)
        self.env = clean_env()
        self.env.update(CCPOOL_SERVICE_BINARY=CCPOOL, LANG="C", LC_ALL="C")
        self.clients = []
        self.nodes = []
        self.pid_dirs = []
        self.redis = Redis(self.path())
        self.addCleanup(self.cleanup)
        self.redis.start()

    def cleanup(self):
        end_clients(self.clients)
        for n in self.nodes:
            n.stop()
        kill_recorded(self.recorded_pids())
        self.redis.kill()

    def shared_key_file(self):
        """One HMAC key file (mode 0600) for every node of the case."""
        key = self.path("cluster.key")
        if not os.path.exists(key):
            self.write("cluster.key", os.urandom(32).hex(), 0o600)
        return key

    def node(self, name, *args, **kw):
        n = Node(self, name)
        self.nodes.append(n)
        return n.start(*args, **kw)

    # --- files -----------------------------------------------------------
    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def write(self, rel, data, mode=0o644):
        p = self.path(rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)
        os.chmod(p, mode)
        return p

    def read_bytes(self, rel):
        with open(self.path(rel), "rb") as f:
            return f.read()

    def recorded_pids(self):
        pids = []
        for d in self.pid_dirs:
            for name in os.listdir(d) if os.path.isdir(d) else []:
                try:
                    with open(os.path.join(d, name)) as fh:
                        pids += [int(x) for x in fh.read().split() if x.isdigit()]
                except OSError:
                    pass
        return pids

    def finish(self, procs, timeout=HANG_GUARD_S):
        """[(rc, stdout, stderr)] per client; a client past `timeout` fails the test."""
        out = []
        deadline = time.monotonic() + timeout
        for p in procs:
            try:
                o, e = p.communicate(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                raise AssertionError(f"client {p.args} hung past {timeout} s")
            out.append((p.returncode, o, e))
        return out


