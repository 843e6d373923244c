"""Shared base for the end-to-end suites (tests/e2e/): real compilers through
the real service, the shim and `ccpool run`.

It extends the service harness (tests/service/support/harness.py: a private
directory /tmp/ccpool-tests/e2e/<test>.XXXX with store/, run/sock and work/, a
private `ccpool serve --foreground`, cleanup of every service on that socket)
with what the compiler and launcher cases need: direct reference compiles,
compiles through `ccpool exec` under a chosen umask, counter deltas, a "gate"
job that holds the pool's only slot so concurrent requests provably queue
behind it (no timing assumptions), and cleanup of stray descendants.

Environment (set by tests/e2e/CMakeLists.txt): CCPOOL_BIN = <build>/bin,
CCPOOL_LIB = <build>/lib (libccpool-shim.so), CCPOOL_SOURCE_DIR = the checkout.
"""
import os
import shutil
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("CCPOOL_SOURCE_DIR",
                            os.path.abspath(os.path.join(HERE, "..", "..", "..")))
sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "service", "support"))
import harness  # noqa: E402
from harness import (CCPOOL, HANG_GUARD_S, TESTS_ROOT, ServiceCase, main, pid_gone,  # noqa: E402,F401
                     serve_pids, wait_until)

LIB = os.environ.get("CCPOOL_LIB", os.path.join(os.path.dirname(CCPOOL), "..", "lib"))
SHIM = os.path.abspath(os.path.join(LIB, "libccpool-shim.so"))
PYTHON = "/usr/bin/python3"  # Debian's, never a pyenv shim on PATH
GEN_KERNELS = os.path.join(SOURCE_DIR, "scripts", "lib", "gen_kernels.py")
RANK = os.path.join(SOURCE_DIR, "scripts", "lib", "rank.py")

COUNTERS = ("requests", "hits", "misses", "joins", "executions", "failures", "passthrough",
            "fallbacks", "not_stored", "store_errors", "service_errors")

# Holds a pool slot until the test creates `gate` in the work dir. A
# pass-through job: it is never cached, so it runs every time.
GATE_JOB = ["/bin/sh", "-c", "i=0; while [ ! -e gate ] && [ $i -lt 1800 ]; do "
            "sleep 0.05; i=$((i+1)); done"]


def descendants(pid):
    """Every live descendant of `pid` (read from /proc/<pid>/task/*/children)."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                with open(f"/proc/{p}/task/{t}/children") as f:
                    kids = [int(x) for x in f.read().split()]
            except OSError:
                continue
            found += kids
            todo += kids
    return found


class E2ECase(ServiceCase):
    CC = "gcc"
    CXX = "g++"

    def setUp(self):
        # Our directories live apart from the service suite's (same method-name
        # prefixes): /tmp/ccpool-tests/e2e/<test>.XXXX.
        harness.TESTS_ROOT = os.path.join(TESTS_ROOT, "e2e")
        super().setUp()
        self.strays = []  # pids to SIGKILL in tearDown if still alive
        self.need_tool(self.CC)
        self.need_tool(self.CXX)

    def tearDown(self):
        super().tearDown()
        for pid in self.strays:
            if not pid_gone(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def need_tool(self, name):
        if shutil.which(name, path=self.env["PATH"]) is None:
            self.skipTest(f"'{name}' is not installed (scripts/setup-deps.sh installs it)")

    def need_shim(self):
        if not os.path.exists(SHIM):
            self.fail(f"'{SHIM}' is missing: build the ccpool-shim target (CCPOOL_LIB names "
                      "the build's lib dir)")

    # --- running things --------------------------------------------------
    def _run(self, cmd, umask=None, env=None, cwd=None, stdin=None):
        e = dict(self.env)
        e.update(env or {})
        pre = (lambda: os.umask(umask)) if umask is not None else None
        p = subprocess.Popen(cmd, env=e, cwd=cwd or self.work, preexec_fn=pre,
                             stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.clients.append(p)
        return p

    def wait_one(self, p, stdin=None):
        try:
            out, err = p.communicate(input=stdin, timeout=HANG_GUARD_S)
        except subprocess.TimeoutExpired:
            p.kill()
            raise AssertionError(f"{p.args} hung")
        return p.returncode, out, err

    def direct(self, args, umask=None, env=None, cwd=None, stdin=None):
        """The reference: the compiler run directly. (rc, stdout, stderr)."""
        return self.wait_one(self._run(args, umask, env, cwd, stdin), stdin)

    def start_via(self, args, umask=None, env=None, cwd=None, stdin=None):
        return self._run([CCPOOL, "exec", "--socket", self.sock, "--", *args], umask, env, cwd,
                         stdin)

    def via(self, args, umask=None, env=None, cwd=None, stdin=None):
        """The same command through `ccpool exec` (the shim's client path)."""
        return self.wait_one(self.start_via(args, umask, env, cwd, stdin), stdin)

    # --- files -------------------------------------------------------------
    def wpath(self, *parts):
        return os.path.join(self.work, *parts)

    def put(self, rel, text):
        return self.write(os.path.join("work", rel), text)

    def bytes_of(self, rel):
        with open(self.wpath(rel), "rb") as f:
            return f.read()

    def mode_of(self, rel):
        return os.stat(self.wpath(rel)).st_mode & 0o7777

    def remove(self, *rels):
        for rel in rels:
            try:
                os.remove(self.wpath(rel))
            except FileNotFoundError:
                pass

    # --- counters ----------------------------------------------------------
    def counters(self):
        s = self.status()
        return {k: s[k] for k in COUNTERS}

    def delta(self, before):
        now = self.counters()
        return {k: now[k] - before[k] for k in COUNTERS}

    def assert_delta(self, before, **expected):
        d = self.delta(before)
        self.assertEqual({k: d[k] for k in expected}, expected, f"all deltas: {d}")
        return d

    # --- a gate that holds the only slot -------------------------------------
    def hold_slot(self):
        """Starts GATE_JOB and waits until it runs; requests sent afterwards
        queue (a service started with jobs=1) until release_slot()."""
        self.remove("gate")
        before = self.counters()
        p = self.start_via(GATE_JOB)
        self.wait_status(lambda s: s["requests"] == before["requests"] + 1 and s["running"] == 1,
                         "the gate job to hold the slot")
        return p

    def release_slot(self, p):
        open(self.wpath("gate"), "w").close()
        rc, out, err = self.wait_one(p)
        self.assertEqual(rc, 0, err)
