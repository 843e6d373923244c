"""Graph compiles deduplicated across the ranks of a node (docs/graph-cache.md).

Inductor's FX-graph cache and AOTAutograd's cache both have a remote tier
behind `RemoteCache.backend_override_cls`. ccpool installs a backend there that
talks to the service's Redis front over its Unix socket (no `redis` package
needed) and turns a lookup into CCPOOL.LEASE:

- the value is in the node store: a hit;
- nobody computes it: this rank leads (a miss: it compiles and its put SETs
  the value, which ends the lease);
- another rank computes it: wait for its SET and load the graph it stored;
  "+MISS" (the leader gave up, died, or the wait passed its bound) means
  compile here.

A lease this thread took and did not SET is released when the compile that
took it ends (OutputGraph.call_user_compiler, Inductor's _compile_fx_inner,
which also runs a lazily compiled backward), and a led AOTAutograd entry at
once when the FX cache bypasses one of its graphs (AOTAutograd will not
store it): an uncacheable graph or a failed compile never holds waiters for
long. A broken connection is a miss, never an error; a forked child opens
its own.

The autotune caches go to the same store without leases: their values are
written after GPU benchmarking in the parent, long after the lookup.
"""
from __future__ import annotations

import functools
import os
import threading
from typing import Any, List, Optional, Set

from . import _env
from ._resp import RespConnection, RespError

_local = threading.local()
# Bound on one wait for another rank's graph; the front caps it too.
WAIT_S = 600.0


def _own_process() -> None:
    """A forked child starts with its parent's thread-local state: neither
    the connection (parent and child would read each other's replies) nor
    the leases (the parent's compiles fill them) are its own."""
    pid = os.getpid()
    if getattr(_local, "pid", None) == pid:
        return
    inherited = getattr(_local, "conn", None)
    _local.conn = None
    _local.held = []
    _local.autograd = set()
    _local.pid = pid
    if inherited is not None:
        inherited.close()  # this process's copy of the socket only; the parent's stays open


# A child that never looks anything up must not keep the parent's socket open
# either: the front ends a dead leader's leases when its connection closes.
os.register_at_fork(after_in_child=_own_process)


def _conn() -> Optional[RespConnection]:
    _own_process()
    conn = getattr(_local, "conn", None)
    if conn is not None and not conn.usable:  # an earlier call failed or was interrupted
        _drop_conn()
        conn = None
    if conn is None:
        path = _env.resp_socket()
        if not path:
            return None
        try:
            conn = RespConnection(path)
        except OSError:
            return None
        _local.conn = conn
    return conn


def _drop_conn() -> None:
    """Closes this thread's connection. The front ends a closed connection's
    leases itself, so none of them is this thread's any more."""
    conn = getattr(_local, "conn", None)
    _local.conn = None
    _held().clear()
    _autograd().clear()
    if conn is not None:
        conn.close()


def _held() -> List[str]:
    _own_process()
    held = getattr(_local, "held", None)
    if held is None:
        held = _local.held = []
    return held


def _autograd() -> Set[str]:
    """The held keys that are AOTAutograd entries (the rest are FX graphs)."""
    _own_process()
    keys = getattr(_local, "autograd", None)
    if keys is None:
        keys = _local.autograd = set()
    return keys


def get(key: str, lease: bool, autograd: bool = False) -> Optional[bytes]:
    conn = _conn()
    if conn is None:
        return None
    wait_s = _env.seconds("CCPOOL_GRAPH_WAIT_S", WAIT_S)
    try:
        if lease:
            reply = conn.call("CCPOOL.LEASE", key, str(int(wait_s * 1000)), timeout_s=wait_s + 30)
        else:
            reply = conn.call("GET", key)
    except RespError:
        _drop_conn()
        return None
    if isinstance(reply, bytes):
        return reply
    if reply == "LEAD":
        _held().append(key)
        if autograd:
            _autograd().add(key)
    return None


def put(key: str, data: bytes) -> None:
    held = _held()
    if key in held:
        held.remove(key)
        if key not in held:
            _autograd().discard(key)
    conn = _conn()
    if conn is None:
        return
    try:
        conn.call("SET", key, data)
    except RespError:
        _drop_conn()


def _release(taken: List[str]) -> None:
    conn = _conn() if taken else None
    for key in taken:
        if conn is None:
            break
        try:
            conn.call("CCPOOL.RELEASE", key)
        except RespError:
            _drop_conn()  # the front forgets a closed connection's leases itself
            break


def release_since(before: List[str]) -> int:
    """Releases the leases this thread took since `before` (a copy of its
    held list then) and did not SET. Returns how many."""
    held = _held()
    taken = [key for key in held if key not in before]
    held[:] = [key for key in held if key in before]
    _autograd().difference_update(k for k in taken if k not in held)
    _release(taken)
    return len(taken)


def release_autograd() -> int:
    """Releases the AOTAutograd entries this thread leads and did not SET."""
    held, keys = _held(), _autograd()
    taken = [key for key in held if key in keys]
    held[:] = [key for key in held if key not in keys]
    keys.clear()
    _release(taken)
    return len(taken)


def snapshot() -> List[str]:
    return list(_held())


def held_count() -> int:
    return len(_held())


def install(remote_cache: Any) -> None:
    """Patches torch._inductor.remote_cache (just imported)."""
    base = remote_cache.RemoteCacheBackend

    class LeasedFrontBackend(base):  # type: ignore[misc, valid-type]
        """FX graphs: lookups take leases."""

        def _get(self, key: str) -> Optional[bytes]:
            return get(key, lease=True)

        def _put(self, key: str, data: bytes) -> None:
            put(key, data)

    class LeasedAutogradBackend(LeasedFrontBackend):
        """AOTAutograd entries: leases too, which an FX bypass ends."""

        def _get(self, key: str) -> Optional[bytes]:
            return get(key, lease=True, autograd=True)

    class FrontBackend(base):  # type: ignore[misc, valid-type]
        """Autotune results: shared, no single flight."""

        def _get(self, key: str) -> Optional[bytes]:
            return get(key, lease=False)

        def _put(self, key: str, data: bytes) -> None:
            put(key, data)

    for name, backend in (("RemoteFxGraphCache", LeasedFrontBackend),
                          ("RemoteAOTAutogradCache", LeasedAutogradBackend)):
        cls = getattr(remote_cache, name, None)
        if cls is not None and cls.backend_override_cls is None:
            cls.backend_override_cls = backend
    for name in ("RemoteAutotuneCache", "RemoteBundledAutotuneCache"):
        cls = getattr(remote_cache, name, None)
        if cls is not None and cls.backend_override_cls is None:
            cls.backend_override_cls = FrontBackend


def _releasing(fn: Any) -> Any:
    """`fn` that releases, when it returns or raises, the leases taken
    during it and not filled."""
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        before = snapshot()
        try:
            return fn(*args, **kwargs)
        finally:
            release_since(before)

    call._ccpool_wrapped = True  # type: ignore[attr-defined]
    return call


def install_release(output_graph: Any) -> None:
    """Patches torch._dynamo.output_graph (just imported): every graph compile
    releases the leases it took and did not fill."""
    cls = output_graph.OutputGraph
    if not getattr(cls.call_user_compiler, "_ccpool_wrapped", False):
        cls.call_user_compiler = _releasing(cls.call_user_compiler)


def install_inner_release(compile_fx: Any) -> None:
    """Patches torch._inductor.compile_fx (just imported): each of Inductor's
    FX graph compiles releases the lease its lookup took when it ends, stored
    or not. AOTAutograd compiles a training graph's backward lazily, at the
    first backward() and outside any Dynamo compile, so call_user_compiler
    alone would leave that lease held for the life of the process.
    compile_fx_inner looks `_compile_fx_inner` up at every call."""
    inner = getattr(compile_fx, "_compile_fx_inner", None)
    if inner is not None and not getattr(inner, "_ccpool_wrapped", False):
        compile_fx._compile_fx_inner = _releasing(inner)


def _autograd_entry_bundled() -> bool:
    try:
        from torch._functorch._aot_autograd.autograd_cache import should_bundle_autograd_cache
        return bool(should_bundle_autograd_cache())
    except Exception:
        return False  # unknown: releasing is the safe side (a waiter compiles itself)


def install_bypass_release(codecache: Any) -> None:
    """Patches torch._inductor.codecache (just imported): when Inductor finds
    a graph it cannot cache (FxGraphCache.prepare_key returns no key), nothing
    this compile leads will be stored. AOTAutograd stores its entry only when
    every FX graph in it has a key, unless it bundles them, so the AOTAutograd
    entries this thread leads are released at once: the ranks waiting for them
    go on now, not after the leader's whole compile. FX graph leases are left
    to the compiles that took them."""
    cls = getattr(codecache, "FxGraphCache", None)
    original = getattr(cls, "prepare_key", None)
    if cls is None or original is None or getattr(original, "_ccpool_wrapped", False):
        return

    def prepare_key(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        if result[0] is None and _autograd() and not _autograd_entry_bundled():
            release_autograd()
        return result

    prepare_key._ccpool_wrapped = True  # type: ignore[attr-defined]
    cls.prepare_key = staticmethod(prepare_key)
