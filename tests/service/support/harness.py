"""Real-process harness for the node service tests (tests/service/).

Each test gets its own directory /tmp/ccpool-tests/<test>.XXXX holding the
store (store/), the socket dir (run/, which also holds the service's log,
lock and fallbacks.log) and the test's tools. It starts its own
`ccpool serve --foreground` on its own socket and always stops it, plus every
auto-started service on that socket and every pid the tools recorded, so tests
can run in parallel (`ctest -j2`). The directory is removed on success and
kept (and printed) on failure or skip.

Run one case:  CCPOOL_BIN=<build>/bin /usr/bin/python3 <file>.py Class.test_x
Exit codes: 0 pass, 1 fail, 125 skip (CTest SKIP_RETURN_CODE).
"""
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest

BIN = os.environ.get("CCPOOL_BIN", "")
CCPOOL = os.path.join(BIN, "ccpool")
TESTS_ROOT = "/tmp/ccpool-tests"
HANG_GUARD_S = 90  # generous: only catches hangs, never measures speed

_kept_dirs = []


def pid_gone(pid, service_pid=None):
    """True when `pid` no longer runs. A zombie whose parent is not the
    service (a grandchild reparented to a non-reaping init in a container)
    counts as gone; a zombie child of the service does not (it must reap)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return True
    fields = stat[stat.rfind(")") + 2:].split()
    state, ppid = fields[0], int(fields[1])
    return state in ("Z", "X") and ppid != service_pid


def pids_naming(path, word=None):
    """Live (non-zombie) pids whose argv contains `path` exactly, and `word` when given."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        if stat[stat.rfind(")") + 2] == "Z" or path.encode() not in argv:
            continue
        if word is None or word in argv:
            found.append(int(entry))
    return found


def serve_pids(sock):
    """Pids of `ccpool serve` processes whose argv names `sock`."""
    return pids_naming(sock, b"serve")


def wait_until(predicate, what, timeout=HANG_GUARD_S, step=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


class ServiceCase(unittest.TestCase):
    """Base class: a private directory, a service on a private socket."""

    def setUp(self):
        if not os.access(CCPOOL, os.X_OK):
            self.fail(f"CCPOOL_BIN must name the build's bin dir; '{CCPOOL}' is not "
                      "executable (build the ccpool and ccpool-client targets first)")
        os.makedirs(TESTS_ROOT, mode=0o755, exist_ok=True)
        self.dir = tempfile.mkdtemp(prefix=self._testMethodName + ".", dir=TESTS_ROOT)
        _kept_dirs.append(self.dir)
        self.store = os.path.join(self.dir, "store")
        self.run_dir = os.path.join(self.dir, "run")
        self.sock = os.path.join(self.run_dir, "sock")
        self.work = os.path.join(self.dir, "work")
        os.makedirs(self.work)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("CCPOOL_") and k not in ("LD_PRELOAD", "RANK", "LOCAL_RANK")}
        env.update(CCPOOL_DIR=self.store, CCPOOL_SOCKET=self.sock, CCPOOL_SERVICE_BINARY=CCPOOL,
                   PATH="/usr/local/bin:/usr/bin:/bin")
        self.env = env
        self.service = None
        self.clients = []
        self.pid_files = []  # files (or dirs of files) where tools record their pids

    def tearDown(self):
        for p in self.clients:
            if p.poll() is None:
                p.kill()
        for p in self.clients:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                pass
        if self.service is not None and self.service.poll() is None:
            self.service.send_signal(signal.SIGTERM)
            try:
                self.service.wait(30)
            except subprocess.TimeoutExpired:
                self.service.kill()
                self.service.wait(10)
        for pid in serve_pids(self.sock):  # auto-started daemons
            os.kill(pid, signal.SIGTERM)
        for pid in serve_pids(self.sock):
            try:
                wait_until(lambda: pid_gone(pid), f"service {pid} to exit", timeout=20)
            except AssertionError:
                os.kill(pid, signal.SIGKILL)
        for pid in self.recorded_pids():
            if not pid_gone(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

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
        cmd = [CCPOOL, "serve", "--foreground", "--no-resp", "--socket", self.sock,
               "--dir", self.store, "--jobs", str(jobs), "--idle-timeout", idle_timeout, *args]
        self.service_log = open(self.path("serve.out"), "wb")
        self.service = subprocess.Popen(cmd, env=env, stdout=self.service_log,
                                        stderr=subprocess.STDOUT, cwd=self.dir)

        def answers():
            if self.service.poll() is not None:
                raise AssertionError(f"ccpool serve exited {self.service.returncode}; "
                                     f"see {self.path('serve.out')}")
            return self.try_status() is not None
        wait_until(answers, "the service to answer status")
        return self.service

    def try_status(self, sock=None):
        r = subprocess.run([CCPOOL, "status", "--socket", sock or self.sock, "--json"],
                           env=self.env, capture_output=True, timeout=30)
        if r.returncode != 0:
            return None
        return json.loads(r.stdout)

    def status(self):
        s = self.try_status()
        self.assertIsNotNone(s, "ccpool status --json failed")
        return s

    def wait_status(self, predicate, what):
        return wait_until(lambda: (lambda s: s if s and predicate(s) else None)(self.try_status()),
                          what)

    # --- clients ---------------------------------------------------------
    def exec_cmd(self, program_args, inputs=(), outputs=()):
        cmd = [CCPOOL, "exec", "--socket", self.sock]
        for i in inputs:
            cmd += ["--input", i]
        for o in outputs:
            cmd += ["--output", o]
        return cmd + ["--", *program_args]

    def spawn(self, program_args, inputs=(), outputs=(), env=None, cwd=None):
        e = dict(self.env)
        e.update(env or {})
        p = subprocess.Popen(self.exec_cmd(program_args, inputs, outputs), env=e,
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
