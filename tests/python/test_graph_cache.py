"""ccpool._graph_cache and ccpool._resp against a real service's Redis front
(docs/graph-cache.md): a rank is never handed a reply meant for another
lookup, whatever interrupted it, and a forked child never shares its
parent's connection or leases."""
from __future__ import annotations

import json
import os
import signal
import sys
import threading
from typing import Any, Dict, Iterator

import pytest

from ccpool import _graph_cache
from ccpool._resp import RespConnection, RespError

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "service", "support"))
from service_fixture import Service  # noqa: E402

CCPOOL = os.path.join(os.environ["CCPOOL_BUILD_DIR"], "bin", "ccpool")
KEY_A = "pt2:fx-graph-v1::fAAAA:c1"
KEY_B = "pt2:fx-graph-v1::fBBBB:c1"
KEY_P = "pt2:fx-graph-v1::fPPPP:c1"


@pytest.fixture
def front(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Service]:
    """A service of the test's own with its Redis front; the hooks' state is fresh."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CCPOOL_") and k != "LD_PRELOAD"}
    svc = Service(os.path.join(tmp_path, "s", "sock"), os.path.join(tmp_path, "store"), env,
                  os.path.join(tmp_path, "serve.log"), str(tmp_path), ccpool=CCPOOL)
    svc.start(resp=True)
    monkeypatch.setenv("CCPOOL_RESP_SOCKET", svc.resp_sock)
    # A wait the code under test should never reach ends in seconds, not 600: a regression
    # fails instead of hanging the suite.
    monkeypatch.setenv("CCPOOL_GRAPH_WAIT_S", "5")
    monkeypatch.setattr(_graph_cache, "_local", threading.local())
    try:
        yield svc
    finally:
        svc.stop()


def leases(svc: Service) -> Dict[str, int]:
    value: Dict[str, int] = svc.status().get("leases", {})
    return value


def test_an_interrupted_wait_never_hands_its_reply_to_the_next_lookup(front: Service) -> None:
    leader = RespConnection(front.resp_sock)
    assert leader.call("CCPOOL.LEASE", KEY_A, "60000") == "LEAD"

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt  # Ctrl-C in a notebook, or a test runner's timeout

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    try:
        with pytest.raises(KeyboardInterrupt):
            _graph_cache.get(KEY_A, lease=True)  # waits for the leader
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert leader.call("SET", KEY_A, b"graph A") == "OK"

    # The next lookup, of another graph nobody has: this rank leads it. Before the fix
    # the interrupted call's reply, A's graph, was read as B's.
    assert _graph_cache.get(KEY_B, lease=True) is None
    assert _graph_cache.held_count() == 1
    _graph_cache.put(KEY_B, b"graph B")
    assert leader.call("GET", KEY_B) == b"graph B"
    assert leader.call("GET", KEY_A) == b"graph A"


def test_after_a_failed_call_the_thread_holds_none_of_the_closed_connections_leases(front: Service) -> None:
    assert _graph_cache.get(KEY_P, lease=True) is None  # this thread leads P
    other = RespConnection(front.resp_sock)
    assert other.call("CCPOOL.LEASE", KEY_A, "60000") == "LEAD"

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    try:
        with pytest.raises(KeyboardInterrupt):
            _graph_cache.get(KEY_A, lease=True)  # waits for `other`; its connection ends
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert _graph_cache.get(KEY_B, lease=True) is None  # a new connection; it leads B
    # The front ended P with the old connection: the thread holds B alone, and P is free.
    assert _graph_cache.held_count() == 1
    assert other.call("CCPOOL.LEASE", KEY_P, "0") == "LEAD"


def test_a_connection_that_failed_a_call_is_never_read_again(front: Service) -> None:
    leader = RespConnection(front.resp_sock)
    assert leader.call("CCPOOL.LEASE", KEY_A, "60000") == "LEAD"
    waiter = RespConnection(front.resp_sock)
    with pytest.raises(RespError):
        waiter.call("CCPOOL.LEASE", KEY_A, "60000", timeout_s=0.3)  # its reply is still owed
    assert leader.call("SET", KEY_A, b"graph A") == "OK"
    with pytest.raises(RespError):
        waiter.call("GET", KEY_B)  # would read A's graph as B's


def test_a_forked_child_never_shares_its_parents_connection_or_leases(front: Service,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CCPOOL_GRAPH_WAIT_S", "1")
    assert _graph_cache.get(KEY_P, lease=True) is None  # the parent leads P
    assert _graph_cache.held_count() == 1
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        report: Dict[str, Any] = {}
        try:
            report["held_at_start"] = _graph_cache.held_count()
            # The parent leads P: the child waits (1 s bound) and gets a miss; it does not lead.
            report["value"] = repr(_graph_cache.get(KEY_P, lease=True))
            report["held_after"] = _graph_cache.held_count()
        except BaseException as e:  # noqa: B036 - anything is a failure the parent reports
            report["error"] = repr(e)
        os.write(write_end, json.dumps(report).encode())
        os._exit(0)
    os.close(write_end)
    _, status = os.waitpid(pid, 0)
    with os.fdopen(read_end) as f:
        report = json.loads(f.read() or "{}")
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    assert report == {"held_at_start": 0, "value": "None", "held_after": 0}, report
    s = leases(front)
    assert s["waits"] >= 1 and s["timed_out"] >= 1, s

    # The parent's connection is still in step and its lease still its own.
    _graph_cache.put(KEY_P, b"graph P")
    assert _graph_cache.held_count() == 0
    assert _graph_cache.get(KEY_P, lease=True) == b"graph P"


def test_a_forked_child_takes_the_triton_cache_lock_a_parent_thread_held(front: Service,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread of the parent holds _triton_cache's lock (as one waiting on a
    lease does) when another thread forks: the child must not inherit the lock
    held, nor the parent's connection."""
    import types
    fake = {name: types.ModuleType(name) for name in ("triton", "triton.runtime", "triton.runtime.cache")}
    fake["triton.runtime.cache"].FileCacheManager = object  # type: ignore[attr-defined]
    for name, module in fake.items():
        monkeypatch.setitem(sys.modules, name, module)
    from ccpool import _triton_cache
    monkeypatch.setattr(_triton_cache, "_conn", RespConnection(front.resp_sock))
    monkeypatch.setattr(_triton_cache, "_conn_pid", os.getpid())
    taken, done = threading.Event(), threading.Event()

    def hold() -> None:
        with _triton_cache._lock:
            taken.set()
            done.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert taken.wait(30)
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover
            got = _triton_cache._lock.acquire(timeout=2)
            os.write(write_end, json.dumps({"lock": got, "conn": _triton_cache._conn is None}).encode())
            os._exit(0)
        os.close(write_end)
        os.waitpid(pid, 0)
        with os.fdopen(read_end) as f:
            report = json.loads(f.read() or "{}")
    finally:
        done.set()
        holder.join()
    assert report == {"lock": True, "conn": True}, report


def test_a_connection_is_refused_in_another_process(front: Service) -> None:
    conn = RespConnection(front.resp_sock)
    assert conn.call("SET", KEY_A, b"graph A") == "OK"
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover
        try:
            conn.call("GET", KEY_A)
            os.write(write_end, b"answered")
        except RespError as e:
            os.write(write_end, str(e).encode())
        os._exit(0)
    os.close(write_end)
    os.waitpid(pid, 0)
    with os.fdopen(read_end) as f:
        said = f.read()
    assert "opened by process" in said, said
    assert conn.call("GET", KEY_A) == b"graph A"
