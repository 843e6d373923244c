"""The one way a Python test gets, and gets rid of, a ccpool service.

Every suite that needs a service comes here (tests/service, tests/e2e,
tests/cli, tests/resp_e2e, tests/remote_e2e, tests/torch, tests/python,
tests/packaging and scripts/chaos_soak.py):

- `Service`: a private `ccpool serve --foreground`, a child of the test, on
  its own socket and store, with its output in a log file; `start()` returns
  once `ccpool status` answers on the socket (and, with the Redis front on,
  once resp.sock exists beside it); `stop()` is SIGTERM, then SIGKILL.
- `serve_daemon()`: `ccpool serve` as a restart policy runs it (it
  daemonizes; its pid is read from serve.pid beside the socket).
- a service that the code under test auto-starts (`ccpool run`,
  `ccpool exec`, `ccpool.enable()`) is the test's to end: `stop_with_cli()`
  (`ccpool stop`, then wait until no `ccpool serve` of that socket runs) or
  `end_services()` (signals, for tearDown).

Standard library only, and typed (tests/python runs mypy --strict over its
users). CCPOOL_BIN names the build's bin dir.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from typing import IO, Any, Callable, Dict, List, Optional, Sequence, TypeVar

BIN = os.environ.get("CCPOOL_BIN", "")
CCPOOL = os.path.join(BIN, "ccpool")
TESTS_ROOT = "/tmp/ccpool-tests"
HANG_GUARD_S = 90  # generous: only catches hangs, never measures speed

T = TypeVar("T")


# --- processes ---------------------------------------------------------------
def pid_gone(pid: int, service_pid: Optional[int] = None) -> bool:
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


def pids_naming(path: str, word: Optional[bytes] = None) -> List[int]:
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


def serve_pids(sock: str) -> List[int]:
    """Pids of `ccpool serve` processes whose argv names `sock`."""
    return pids_naming(sock, b"serve")


def wait_until(predicate: Callable[[], Optional[T]], what: str, timeout: float = HANG_GUARD_S,
               step: float = 0.05) -> T:
    """The predicate's first true value; an AssertionError naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def end_process(proc: Optional["subprocess.Popen[bytes]"], grace: float = 30) -> None:
    """SIGTERM a child that still runs, SIGKILL it after `grace` s; reaped either way."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


# --- status ------------------------------------------------------------------
def try_status(sock: str, env: Dict[str, str], ccpool: str = CCPOOL) -> Optional[Dict[str, Any]]:
    """`ccpool status --json` of the service on `sock`, or None when none answers."""
    r = subprocess.run([ccpool, "status", "--socket", sock, "--json"], env=env, capture_output=True,
                       timeout=30)
    if r.returncode != 0:
        return None
    value: Dict[str, Any] = json.loads(r.stdout)
    return value


# --- a service of the test's own ------------------------------------------------
class Service:
    """One `ccpool serve --foreground` on `sock` with its store in `store`,
    started as a child of the test; its stdout and stderr go to `log`."""

    def __init__(self, sock: str, store: str, env: Dict[str, str], log: str, cwd: str,
                 what: str = "the service", ccpool: str = CCPOOL) -> None:
        self.sock = sock
        self.store = store
        self.env = env
        self.log_path = log
        self.cwd = cwd
        self.what = what  # how failure messages name it
        self.ccpool = ccpool
        self.proc: Optional["subprocess.Popen[bytes]"] = None
        self.log: Optional[IO[bytes]] = None

    @property
    def resp_sock(self) -> str:
        return os.path.join(os.path.dirname(self.sock), "resp.sock")

    def start(self, *args: str, jobs: int = 2, idle_timeout: str = "10m", resp: bool = False,
              env: Optional[Dict[str, str]] = None, append_log: bool = False) -> "subprocess.Popen[bytes]":
        """Starts it and returns once it answers status (and, with `resp`, once
        resp.sock exists); an exit before that fails naming the log."""
        cmd = [self.ccpool, "serve", "--foreground", *([] if resp else ["--no-resp"]),
               "--socket", self.sock, "--dir", self.store, "--jobs", str(jobs),
               "--idle-timeout", idle_timeout, *args]
        if self.log is not None:
            self.log.close()
        self.log = open(self.log_path, "ab" if append_log else "wb")
        proc = subprocess.Popen(cmd, env=env if env is not None else self.env, stdout=self.log,
                                stderr=subprocess.STDOUT, cwd=self.cwd)
        self.proc = proc

        def up() -> Optional[Dict[str, Any]]:
            if proc.poll() is not None:
                raise AssertionError(f"{self.what}: ccpool serve exited {proc.returncode}; "
                                     f"see {self.log_path}")
            s = self.try_status()
            return s if s is not None and (not resp or os.path.exists(self.resp_sock)) else None
        wait_until(up, f"{self.what} to answer status" + (" and create resp.sock" if resp else ""))
        return proc

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 30 s."""
        end_process(self.proc)
        if self.log is not None:
            self.log.close()
            self.log = None

    def try_status(self) -> Optional[Dict[str, Any]]:
        return try_status(self.sock, self.env, self.ccpool)

    def status(self) -> Dict[str, Any]:
        s = self.try_status()
        if s is None:
            raise AssertionError(f"{self.what}: ccpool status --json failed")
        return s

    def wait_status(self, predicate: Callable[[Dict[str, Any]], bool], what: str) -> Dict[str, Any]:
        """The first status for which `predicate` holds."""
        def holds() -> Optional[Dict[str, Any]]:
            s = self.try_status()
            return s if s is not None and predicate(s) else None
        return wait_until(holds, what)


# --- a daemon, and services the code under test started ---------------------------
def serve_daemon(sock: str, store: str, env: Dict[str, str], *args: str,
                 ccpool: str = CCPOOL) -> Optional[int]:
    """`ccpool serve` as systemd's Restart= or a DaemonSet runs it: it
    daemonizes (a second one exits at once while another instance holds the
    lock). The pid in serve.pid beside the socket, or None."""
    subprocess.run([ccpool, "serve", "--socket", sock, "--dir", store, *args], env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
    try:
        with open(os.path.join(os.path.dirname(sock), "serve.pid")) as f:
            pid = int(f.read().strip())
    except (OSError, ValueError):
        return None
    return None if pid_gone(pid) else pid


def stop_with_cli(sock: str, env: Dict[str, str], ccpool: str = CCPOOL,
                  timeout: float = 60) -> None:
    """`ccpool stop` on `sock`, then waits until no `ccpool serve` of that socket runs."""
    subprocess.run([ccpool, "stop", "--socket", sock], env=env, capture_output=True, timeout=timeout)
    for pid in serve_pids(sock):
        wait_until(lambda: pid_gone(pid), f"service {pid} to stop", timeout=timeout)


def end_services(sock: str, grace: float = 20) -> None:
    """For tearDown: every `ccpool serve` whose argv names `sock` (the test's
    own or auto-started) gets SIGTERM, and SIGKILL when still running after
    `grace` s; then every other process naming `sock` (a `ccpool run` a
    failed test left) gets SIGKILL."""
    services = serve_pids(sock)
    for pid in services:
        _kill(pid, signal.SIGTERM)
    for pid in services:
        try:
            wait_until(lambda: pid_gone(pid), f"service {pid} to exit", timeout=grace)
        except AssertionError:
            _kill(pid, signal.SIGKILL)
    for pid in pids_naming(sock):
        _kill(pid, signal.SIGKILL)


def kill_recorded(pids: Sequence[int]) -> None:
    """SIGKILL each pid a test's tools recorded that still runs."""
    for pid in pids:
        if not pid_gone(pid):
            _kill(pid, signal.SIGKILL)
