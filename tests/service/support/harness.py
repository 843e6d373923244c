"""Real-process harness for the node service tests (tests/service/).

Each test gets its own directory /tmp/ccpool-tests/<test>.XXXX holding the
store (store/), the socket dir (run/, which also holds the service's log,
lock and fallbacks.log) and the test's tools. It starts its own
`ccpool serve --foreground` (service_fixture.Service) on its own socket and always stops it, plus every
auto-started service on that socket and every pid the tools recorded, so tests
can run in parallel (`ctest -j2`). The directory is removed on success and
kept (and printed) on failure or skip.

Run one case:  CCPOOL_BIN=<build>/bin /usr/bin/python3 <file>.py Class.test_x
Exit codes: 0 pass, 1 fail, 125 skip (CTest SKIP_RETURN_CODE).
"""
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import unittest

# The service itself, and the process helpers every suite shares, come from
# service_fixture.py (re-exported here for the suites that import them from harness).
from service_fixture import (BIN, CCPOOL, HANG_GUARD_S, TESTS_ROOT, Service, end_process,  # noqa: F401
                             end_services, kill_recorded, pid_gone, pids_naming, serve_pids,
                             try_status, wait_until)

_kept_dirs = []


def make_case_dir(case, prefix, targets="ccpool and ccpool-client"):
    """The private directory of `case` under TESTS_ROOT, named prefix + a random
    tail: kept, and printed, when the run fails. Fails the case first when
    CCPOOL is not executable, naming the targets to build."""
    if not os.access(CCPOOL, os.X_OK):
        case.fail(f"CCPOOL_BIN must name the build's bin dir; '{CCPOOL}' is not executable "
                  f"(build the {targets} targets first)")
    os.makedirs(TESTS_ROOT, mode=0o755, exist_ok=True)
    path = tempfile.mkdtemp(prefix=prefix, dir=TESTS_ROOT)
    _kept_dirs.append(path)
    return path


def clean_env(drop_prefixes=("CCPOOL_",)):
    """This process's environment for the processes a test starts: without the
    variables that start with drop_prefixes (the test sets its own), LD_PRELOAD,
    RANK and LOCAL_RANK, and with the system's PATH."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(drop_prefixes) and k not in ("LD_PRELOAD", "RANK", "LOCAL_RANK")}
    env.update(PATH="/usr/local/bin:/usr/bin:/bin")
    return env


class ServiceCase(unittest.TestCase):
    """Base class: a private directory, a service on a private socket."""

    def setUp(self):
        self.dir = make_case_dir(self, self._testMethodName + ".")
        self.store = os.path.join(self.dir, "store")
        self.run_dir = os.path.join(self.dir, "run")
        self.sock = os.path.join(self.run_dir, "sock")
        self.work = os.path.join(self.dir, "work")
        os.makedirs(self.work)
        self.env = clean_env()
        self.env.update(CCPOOL_DIR=self.store, CCPOOL_SOCKET=self.sock, CCPOOL_SERVICE_BINARY=CCPOOL)
        self.service = None
        self.clients = []
        self.pid_files = []  # files (or dirs of files) where tools record their pids

    def tearDown(self):
        end_clients(self.clients)
        end_process(self.service)
        end_services(self.sock)  # auto-started daemons too
        kill_recorded(self.recorded_pids())

    # --- files and tools -------------------------------------------------
    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def write(self, rel, text, mode=0o644):
        p = self.path(rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text)
        os.chmod(p, mode)
        return p

    def read(self, rel, default=None):
        try:
            with open(self.path(rel)) as f:
                return f.read()
        except FileNotFoundError:
            if default is None:
                raise
            return default

    def lines(self, rel):
        return [l for l in self.read(rel, "").split("\n") if l]

    def recorded_pids(self):
        pids = []
        for f in self.pid_files:
            paths = [os.path.join(f, n) for n in os.listdir(f)] if os.path.isdir(f) else [f]
            for p in paths:
                try:
                    with open(p) as fh:
                        pids += [int(x) for x in fh.read().split() if x.isdigit()]
                except OSError:
                    pass
        return pids

    # --- the service -----------------------------------------------------
    def start_service(self, *args, fault=None, jobs=2, extra_env=None, idle_timeout="10m"):
        env = dict(self.env)
        if fault:
            env["CCPOOL_FAULT"] = fault
        env.update(extra_env or {})
        self.server = Service(self.sock, self.store, self.env, self.path("serve.out"), cwd=self.dir)
        self.service = self.server.start(*args, jobs=jobs, idle_timeout=idle_timeout, env=env)
        self.service_log = self.server.log
        return self.service

    def try_status(self, sock=None):
        return try_status(sock or self.sock, self.env)

    def status(self):
        s = self.try_status()
        self.assertIsNotNone(s, "ccpool status --json failed")
        return s

    def wait_status(self, predicate, what):
        return wait_until(lambda: (lambda s: s if s and predicate(s) else None)(self.try_status()),
                          what)

    # --- clients ---------------------------------------------------------
    def spawn(self, program_args, inputs=(), outputs=(), env=None, cwd=None):
        e = dict(self.env)
        e.update(env or {})
        p = subprocess.Popen(exec_argv(self.sock, program_args, inputs, outputs), env=e,
                             cwd=cwd or self.work, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        self.clients.append(p)
        return p

    def finish(self, procs):
        """[(rc, stdout, stderr)] for each client, waiting at most the guard."""
        out = []
        for p in procs:
            try:
                o, e = p.communicate(timeout=HANG_GUARD_S)
            except subprocess.TimeoutExpired:
                p.kill()
                raise AssertionError(f"client {p.args} hung")
            out.append((p.returncode, o, e))
        return out

    def run_exec(self, program_args, inputs=(), outputs=(), env=None, cwd=None):
        return self.finish([self.spawn(program_args, inputs, outputs, env, cwd)])[0]


# --- raw protocol (ipc/PROTOCOL.md) -----------------------------------------
MAGIC = b"CCPL"
T_HELLO, T_HELLO_OK, T_STATUS, T_STATUS_REPLY, T_PING, T_PONG, T_ERROR = 1, 2, 5, 6, 9, 10, 11
E_UNSUPPORTED, E_PROTOCOL, E_PERMISSION = 4, 8, 9


def end_clients(procs):
    """Kills each client process still running (SIGCONT first, for one a test
    stopped) and reaps them all, waiting at most 10 s for each."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGCONT)
            p.kill()
    for p in procs:
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            pass


def exec_argv(sock, program_args, inputs=(), outputs=()):
    """`ccpool exec` on socket `sock` of program_args, declaring the inputs and outputs."""
    cmd = [CCPOOL, "exec", "--socket", sock]
    for i in inputs:
        cmd += ["--input", i]
    for o in outputs:
        cmd += ["--output", o]
    return cmd + ["--", *program_args]


def frame(ftype, payload=b"", version=1, length=None):
    n = len(payload) if length is None else length
    return MAGIC + bytes([version, ftype]) + b"\0\0" + struct.pack("<I", n) + payload


def hello_payload(version=1, pid=None):
    return struct.pack("<IQi", version, 0, pid if pid is not None else os.getpid())


def raw_connect(sock_path, timeout=15):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(sock_path)
    return s


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def read_reply(s):
    """('eof', None), ('error', (code, message)) or (type, payload)."""
    try:
        header = recv_exact(s, 12)
    except ConnectionResetError:
        return "eof", None
    if header is None:
        return "eof", None
    assert header[:4] == MAGIC, f"service sent a bad magic: {header!r}"
    ftype = header[5]
    (n,) = struct.unpack("<I", header[8:12])
    payload = recv_exact(s, n)
    if ftype == T_ERROR:
        (code,) = struct.unpack("<H", payload[:2])
        (mlen,) = struct.unpack("<I", payload[2:6])
        return "error", (code, payload[6:6 + mlen].decode(errors="replace"))
    return ftype, payload


def main():
    """Runs the test named on the command line; exit 125 when it skipped."""
    loader = unittest.TestLoader()
    module = sys.modules["__main__"]
    suite = loader.loadTestsFromNames(sys.argv[1:] or [""], module) if sys.argv[1:] \
        else loader.loadTestsFromModule(module)
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stderr).run(suite)
    if not result.wasSuccessful():
        for d in _kept_dirs:
            print(f"kept test directory: {d}", file=sys.stderr)
        sys.exit(1)
    if result.skipped:
        for d in _kept_dirs:
            shutil.rmtree(d, ignore_errors=True)
        for _, why in result.skipped:
            print(f"SKIPPED: {why}", file=sys.stderr)
        sys.exit(125)
    for d in _kept_dirs:
        shutil.rmtree(d, ignore_errors=True)
    sys.exit(0)
