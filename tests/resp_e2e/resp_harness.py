"""Real-process harness for the Redis-protocol front through the service (tests/resp_e2e/).

Each test gets /tmp/ccpool-tests/resp_e2e.<test>.XXXX. A node is one
`ccpool serve --foreground` with its own socket dir (<node>/run: sock,
resp.sock, ccpool.log) and store (<node>/store). Tests may start several nodes
and a redis-server (the cluster tier). tearDown always stops every node, every
daemon whose argv names one of the test's sockets (`ccpool run` auto-starts
one), and every redis-server it started, so cases run in parallel under
`ctest -j2`. The directory is removed on success and kept (and printed) on
failure.

Run one case:  CCPOOL_BIN=<build>/bin /usr/bin/python3 <file>.py Class.test_x
Exit codes: 0 pass, 1 fail, 125 skip (a missing tool; CTest SKIP_RETURN_CODE).
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import unittest

try:
    import redis  # python3-redis, for Debian's /usr/bin/python3
except ImportError:  # reported as a skip by require_redis_py()
    redis = None

HANG_GUARD_S = 60  # only catches hangs; no assertion measures speed
REDIS_CLI = shutil.which("redis-cli", path="/usr/local/bin:/usr/bin:/bin")
REDIS_SERVER = shutil.which("redis-server", path="/usr/local/bin:/usr/bin:/bin:/usr/sbin")
SETPRIV = "/usr/bin/setpriv"
AS_NOBODY = [SETPRIV, "--reuid=65534", "--regid=65534", "--clear-groups"]
# Variables a job environment may carry in from the developer's shell.
FOREIGN_PREFIXES = ("CCPOOL_", "TORCHINDUCTOR_", "TRITON_")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "service", "support"))
# Shared with tests/service and tests/e2e: paths, kept dirs, the runner (exit 125 on skip), waits.
from harness import (BIN, CCPOOL, TESTS_ROOT, _kept_dirs, clean_env, main, make_case_dir,  # noqa: E402,F401
                     pids_naming, wait_until)
from service_fixture import Service, end_services  # noqa: E402


def free_port():
    """A loopback port nobody listens on now (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Node(Service):
    """One `ccpool serve --foreground` (service_fixture.Service, the Redis
    front on) with its own socket dir and store under <case dir>/<name>."""

    def __init__(self, case, name):
        self.root = os.path.join(case.dir, name)
        self.run_dir = os.path.join(self.root, "run")
        super().__init__(os.path.join(self.run_dir, "sock"), os.path.join(self.root, "store"), case.env,
                         os.path.join(self.root, "serve.out"), cwd=self.root, what=f"node {name}")
        self.name = name
        self.port = None


class RespCase(unittest.TestCase):
    """Base class: a private directory, nodes on private sockets, clients."""

    def setUp(self):
        self.dir = make_case_dir(self, f"resp_e2e.{self._testMethodName}.",
                                 targets="ccpool, ccpool-client and ccpool-shim")
        self.env = clean_env(FOREIGN_PREFIXES)
        self.env.update(CCPOOL_NO_AUTOSTART="1")
        self.nodes = []
        self.redis_servers = []  # (Popen, port)
        self.logs = []

    def tearDown(self):
        for node in self.nodes:
            node.stop()
        for node in self.nodes:  # daemons auto-started on the same socket
            end_services(node.sock)
        for proc, _ in self.redis_servers:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)
        for f in self.logs:
            f.close()

    # --- nodes ------------------------------------------------------------
    def cluster_key_file(self):
        """One HMAC key file (mode 0600) shared by every node of the case."""
        key = os.path.join(self.dir, "cluster.key")
        if not os.path.exists(key):
            fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, os.urandom(32).hex().encode())
            os.close(fd)
        return key

    def start_node(self, name="a", resp_port=None, remote=None, extra=()):
        node = next((n for n in self.nodes if n.name == name), None) or Node(self, name)
        if node not in self.nodes:
            self.nodes.append(node)
        os.makedirs(node.root, exist_ok=True)
        args = list(extra)
        if resp_port is not None:
            args += ["--resp-port", str(resp_port)]
        if remote is not None:
            args += ["--remote", remote, "--remote-key-file", self.cluster_key_file()]
        node.start(*args, resp=True, append_log=True)
        node.port = resp_port
        return node

    def stop_node(self, node):
        node.stop()

    def try_status(self, node):
        return node.try_status()

    def status(self, node):
        s = self.try_status(node)
        self.assertIsNotNone(s, f"ccpool status --json failed for node {node.name}")
        return s

    # --- clients ----------------------------------------------------------
    def require_redis_cli(self):
        if REDIS_CLI is None:
            self.skipTest("redis-cli (redis-tools) is not installed; scripts/setup-deps.sh installs it")

    def require_redis_py(self):
        if redis is None:
            self.skipTest("python3-redis is missing for /usr/bin/python3; scripts/setup-deps.sh installs it")

    def require_root_setpriv(self):
        if os.geteuid() != 0:
            self.skipTest("cross-uid tests need root to run a client as uid 65534")
        if not os.access(SETPRIV, os.X_OK):
            self.skipTest("setpriv (util-linux) is not installed")

    def cli_target(self, node, tcp=False):
        return ["-h", "127.0.0.1", "-p", str(node.port)] if tcp else ["-s", node.resp_sock]

    def cli(self, node, *args, tcp=False, stdin=None, prefix=()):
        """redis-cli's stdout (bytes; raw format, as it is not on a tty). With a
        `prefix` (setpriv) stderr is appended: refusals may arrive on either."""
        cmd = [*prefix, REDIS_CLI, *self.cli_target(node, tcp), *args]
        r = subprocess.run(cmd, input=stdin, capture_output=True, timeout=HANG_GUARD_S)
        return r.stdout + r.stderr if prefix else r.stdout

    def client(self, node, tcp=False, **kw):
        if tcp:
            return redis.Redis(host="127.0.0.1", port=node.port, socket_timeout=HANG_GUARD_S, **kw)
        return redis.Redis(unix_socket_path=node.resp_sock, socket_timeout=HANG_GUARD_S, **kw)

    def cache(self, node, *args, json_out=True):
        cmd = [CCPOOL, "cache", *args, "--dir", node.store] + (["--json"] if json_out else [])
        r = subprocess.run(cmd, env=self.env, capture_output=True, timeout=HANG_GUARD_S)
        self.assertEqual(r.returncode, 0, f"{' '.join(cmd)} failed: {r.stderr.decode(errors='replace')}")
        return json.loads(r.stdout) if json_out else r.stdout

    def assert_cat(self, node, key, expected):
        """`ccpool cache cat KEY value` is the value, byte-exact. Checked in a
        subTest so a failure here does not hide the test's later checks."""
        with self.subTest(check=f"ccpool cache cat {key[:12]}... value"):
            got = self.cache(node, "cat", key, "value", json_out=False)
            self.assertEqual(len(got), len(expected))
            self.assertTrue(got == expected, "ccpool cache cat returned other bytes")

    def entries_by_label(self, node):
        return {e["label"]: e for e in self.cache(node, "ls")}

    # --- the cluster tier -------------------------------------------------
    def start_redis_server(self):
        if REDIS_SERVER is None:
            self.skipTest("redis-server is not installed; scripts/setup-deps.sh installs it")
        port = free_port()
        data = os.path.join(self.dir, f"redis-{port}")
        os.makedirs(data)
        log = open(os.path.join(data, "redis.out"), "wb")
        self.logs.append(log)
        proc = subprocess.Popen([REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                 "--appendonly", "no", "--dir", data], stdout=log, stderr=subprocess.STDOUT)
        self.redis_servers.append((proc, port))
        probe = redis.Redis(host="127.0.0.1", port=port, socket_timeout=5)

        def pings():
            if proc.poll() is not None:
                raise AssertionError(f"redis-server exited {proc.returncode}; see {data}/redis.out")
            try:
                return probe.ping()
            except redis.exceptions.ConnectionError:
                return False
        wait_until(pings, f"redis-server on port {port}")
        return port


