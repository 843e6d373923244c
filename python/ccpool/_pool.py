"""The rank side of the node pool (docs/inductor-workers.md).

Inductor builds its compile-worker pool in AsyncCompile.process_pool() as
`SubprocPool(nprocs, quiesce=...)`. ccpool replaces that name in
torch._inductor.async_compile with NodePool: no sidecar and no workers of the
rank's own; every job (`submit(fn, *args)`, pickled exactly as SubprocPool
pickles it) goes to the service over its socket (a pool session,
ipc/PROTOCOL.md) and runs in a worker of the node pool, bounded with every
other rank's jobs and compilers. Results are unpickled and delivered as
SubprocPool delivers them, so Inductor sees no difference.

When the service cannot be reached, NodePool() returns Inductor's own
SubprocPool instead; when a session breaks or the service cannot run a job,
the jobs it holds run in an Inductor pool of the rank's own, started then.
Nothing is lost either way.

Jobs of different ranks that compile the same kernel get the same flight key
(the kernel's source with the device index left out, the rank's cache paths
left out), so the service runs one and then the others, whose compiles are
then cache hits. The key only orders work: each rank still gets the result
of its own job.
"""
from __future__ import annotations

import base64
import functools
import hashlib
import itertools
import os
import re
import socket
import stat
import struct
import sys
import threading
from concurrent.futures import Future
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import _env
from ._socket_io import recv_exact

# ipc/PROTOCOL.md
MAGIC = b"CCPL"
HEADER = struct.Struct("<4sBBHI")  # magic, framing version, type, reserved, payload length
HELLO, HELLO_OK, ERROR = 1, 2, 11
POOL_OPEN, POOL_OPENED, POOL_SUBMIT, POOL_RESULT, POOL_CANCEL = 12, 13, 14, 15, 16
MAX_FRAME = 64 << 20
READY_KEY = b"ccpool:ready"  # ipc/protocol.h kReadyProbeKey
DONE, FAILED = 0, 1

_original_pool: Any = None  # Inductor's own SubprocPool class
# A job in flight: its future, and the call, kept to run it in the rank when the pool cannot.
Pending = Tuple["Future[Any]", Callable[..., Any], Tuple[Any, ...], Dict[str, Any]]
_warned = False


class SessionError(Exception):
    pass


def _s(b: bytes) -> bytes:
    return struct.pack("<I", len(b)) + b


def _list(items: List[bytes]) -> bytes:
    return struct.pack("<I", len(items)) + b"".join(_s(i) for i in items)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str) -> Any:
        value = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value[0]

    def str(self) -> bytes:
        n = self.take("<I")
        if self.pos + n > len(self.data):
            raise SessionError("truncated frame from the service")
        value = self.data[self.pos:self.pos + n]
        self.pos += n
        return value


class Session:
    """One pool session over the service socket; blocking, its own thread reads."""

    def __init__(self, path: str, timeout_s: float = 10.0) -> None:
        _check_socket_dir(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout_s)
        try:
            self.sock.connect(path)
            creds = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            _pid, uid, _gid = struct.unpack("3i", creds)
            if uid != os.geteuid():
                raise SessionError(f"the listener on {path} runs as uid {uid}, not {os.geteuid()}")
            self.send(HELLO, struct.pack("<IQi", 1, 0, os.getpid()))
            kind, payload = self.read()
            if kind != HELLO_OK:
                raise SessionError(_error_text(kind, payload, "hello"))
        except BaseException:
            self.sock.close()
            raise
        self.write_lock = threading.Lock()

    def send(self, kind: int, payload: bytes) -> None:
        self.sock.sendall(HEADER.pack(MAGIC, 1, kind, 0, len(payload)) + payload)

    def _exact(self, n: int) -> bytes:
        data = recv_exact(self.sock, n)
        if data is None:
            raise SessionError("the service closed the connection")
        return data

    def read(self) -> Tuple[int, bytes]:
        magic, version, kind, reserved, length = HEADER.unpack(self._exact(HEADER.size))
        if magic != MAGIC or version != 1 or reserved != 0 or length > MAX_FRAME:
            raise SessionError("the service sent a malformed frame")
        return kind, self._exact(length)

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def _error_text(kind: int, payload: bytes, what: str) -> str:
    if kind == ERROR:
        r = _Reader(payload)
        r.take("<H")
        return r.str().decode(errors="replace")
    return f"unexpected frame {kind} after {what}"


def _check_socket_dir(path: str) -> None:
    """The client's trust checks (ipc/PROTOCOL.md, docs/threat-model.md)."""
    d = os.path.dirname(os.path.abspath(path))
    try:
        st = os.stat(d)
    except FileNotFoundError:
        raise SessionError(f"no service socket directory {d}") from None
    if st.st_uid != os.geteuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise SessionError(f"{d} is not a private directory of uid {os.geteuid()}")


def _worker_env() -> Dict[str, str]:
    """The environment Inductor gives its own sidecar (SubprocPool.__init__)."""
    try:
        from torch._inductor.utils import python_subprocess_env
        env = dict(python_subprocess_env())
    except ImportError:  # older torch: the same, spelled out
        env = {**os.environ, "PYTHONPATH": os.environ.get("TORCH_CUSTOM_PYTHONPATH", os.pathsep.join(sys.path))}
    try:
        from torch._inductor.utils import get_ld_library_path
        env["LD_LIBRARY_PATH"] = get_ld_library_path()
    except ImportError:
        pass
    env["TORCH_WARM_POOL"] = "0"
    return env


def _open_session(pickler: Any) -> Tuple[Session, int]:
    from torch._inductor.codecache import torch_key

    path = _env.service_socket()
    if not path:
        raise SessionError("CCPOOL_SOCKET is not set")
    session = Session(path)
    env = _worker_env()
    args = [f"--pickler={type(pickler).__module__}.{type(pickler).__qualname__}",
            f"--torch-key={base64.b64encode(torch_key()).decode()}"]
    rank = int(os.environ.get("LOCAL_RANK", os.environ.get("RANK", "-1")) or -1)
    payload = (_s(os.fsencode(sys.executable)) + _s(os.fsencode(os.getcwd())) +
               _list([os.fsencode(k) + b"=" + os.fsencode(v) for k, v in env.items()]) +
               _list([a.encode() for a in args]) + struct.pack("<i", rank))
    try:
        session.send(POOL_OPEN, payload)
        kind, reply = session.read()
        if kind != POOL_OPENED:
            raise SessionError(_error_text(kind, reply, "pool-open"))
    except BaseException:
        session.close()
        raise
    session.sock.settimeout(None)  # jobs take as long as they take; the service bounds them
    return session, struct.unpack("<I", reply)[0]


_DEVICE_INDEX = re.compile(r"(DeviceProperties\(type='[^']*', )index=\d+")
_RANK_PATHS = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


def flight_key(job_fn: Callable[..., Any], args: Tuple[Any, ...], data: bytes) -> bytes:
    """Equal for the jobs of different ranks that compile the same kernel."""
    name = getattr(job_fn, "__qualname__", "")
    if name == "_worker_compile_triton" and len(args) == 3:
        load_kernel, extra_env, extra_config = args
        inner: Tuple[Any, ...] = tuple(getattr(load_kernel, "args", ()))
        if getattr(getattr(load_kernel, "func", None), "__name__", "") == "_load_triton_kernel_from_source" \
                and len(inner) == 2:
            kernel_name, source = inner
            env = sorted((k, v) for k, v in extra_env.items() if k not in _RANK_PATHS)
            text = repr((name, kernel_name, _DEVICE_INDEX.sub(r"\1index=?", source), env,
                         sorted(extra_config.items(), key=repr)))
            return hashlib.sha256(text.encode()).hexdigest().encode()
    return hashlib.sha256(data).hexdigest().encode()


class NodePool:
    """SubprocPool's interface, served by the node pool."""

    def __new__(cls, nprocs: int, *args: Any, **kwargs: Any) -> Any:
        try:
            instance = super().__new__(cls)
            instance._init(nprocs, *args, **kwargs)
            return instance
        except Exception as e:
            _warn(f"the node pool is not reachable ({e}); this rank starts Inductor's own compile workers")
            return _original_pool(nprocs, *args, **kwargs)

    def _init(self, nprocs: int, pickler: Any = None, kind: Any = None, quiesce: bool = False) -> None:
        from torch._inductor.compile_worker.subproc_pool import SubprocKind, SubprocPickler

        self.nprocs = nprocs
        self.pickler = pickler or SubprocPickler()
        self.kind = kind or SubprocKind.FORK
        self.quiesce_requested = quiesce
        self.session, self.max_workers = _open_session(self.pickler)
        self.lock = threading.Lock()
        self.ids = itertools.count(1)
        self.pending: Dict[int, Pending] = {}
        self.write_lock = threading.Lock()
        self.fallback: Any = None
        self.broken = False
        self.running = True
        self.reader = threading.Thread(target=self._read_loop, name="ccpool-node-pool", daemon=True)
        self.reader.start()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass  # everything happened in __new__

    # --- SubprocPool's interface -------------------------------------------------
    def submit(self, job_fn: Callable[..., Any], *args: Any, **kwargs: Any) -> "Future[Any]":
        if not self.running:
            raise RuntimeError("Attempting to use a closed pool")
        # AsyncCompile._get_ready is answered once a worker of this rank's
        # environment is up (the service warms one when the session opens);
        # until then Inductor compiles in the rank itself, exactly as while its
        # own pool starts. It never waits behind other ranks' compiles.
        probe = getattr(job_fn, "__qualname__", "") == "AsyncCompile._get_ready"
        job = functools.partial(job_fn, *args, **kwargs) if (args or kwargs) else job_fn
        data = b"" if probe else self.pickler.dumps(job)
        future: "Future[Any]" = Future()
        future.set_running_or_notify_cancel()
        with self.lock:
            if self.broken:
                local = True
            else:
                local = False
                job_id = next(self.ids)
                self.pending[job_id] = (future, job_fn, args, kwargs)
        if local:
            self._chain(self._fallback_pool().submit(job_fn, *args, **kwargs), future)
            return future
        key = READY_KEY if probe else flight_key(job_fn, args, data)
        frame = struct.pack("<Q", job_id) + _s(key) + _s(data)
        try:
            with self.write_lock:
                self.session.send(POOL_SUBMIT, frame)
        except OSError as e:
            self._break(f"sending a job failed ({e})")
        return future

    def quiesce(self) -> None:
        if self.fallback is not None:
            self.fallback.quiesce()

    def wakeup(self) -> None:
        if self.fallback is not None:
            self.fallback.wakeup()

    def shutdown(self) -> None:
        with self.lock:
            if not self.running:
                return
            self.running = False
            pending, self.pending = self.pending, {}
        self.session.close()
        if self.fallback is not None:
            self.fallback.shutdown()
        for future, *_ in pending.values():
            if not future.cancel() and not future.done():
                future.set_exception(RuntimeError("SubprocPool closed"))

    # --- internals -------------------------------------------------------------------
    def _read_loop(self) -> None:
        while True:
            try:
                kind, payload = self.session.read()
            except (OSError, SessionError, struct.error) as e:
                if self.running:
                    self._break(f"the connection to the service ended ({e})")
                return
            if kind != POOL_RESULT:
                self._break(_error_text(kind, payload, "pool-submit"))
                return
            try:
                r = _Reader(payload)
                job_id, status, followed = r.take("<Q"), r.take("<B"), r.take("<B")
                result, message = r.str(), r.str()
            except (struct.error, SessionError) as e:
                self._break(f"a malformed pool-result ({e})")
                return
            with self.lock:
                entry = self.pending.pop(job_id, None)
            if entry is None:
                continue
            if status == DONE and entry[1] is not None and getattr(entry[1], "__qualname__", "") == \
                    "AsyncCompile._get_ready":
                entry[0].set_result(entry[1]())
            elif status == DONE:
                self._deliver(entry[0], result)
            else:
                _warn(f"the node pool could not run a job ({message.decode(errors='replace')}); "
                      "it runs in this rank's own workers")
                self._run_here(entry)

    def _deliver(self, future: "Future[Any]", data: bytes) -> None:
        from torch._inductor.compile_worker.subproc_pool import SubprocException, _SubprocExceptionInfo

        try:
            result = self.pickler.loads(data)
        except Exception as e:
            future.set_exception(e)
            return
        if isinstance(result, _SubprocExceptionInfo):
            future.set_exception(SubprocException(result.details))
        elif isinstance(result, Exception):
            future.set_exception(result)
        else:
            future.set_result(result)

    def _break(self, why: str) -> None:
        with self.lock:
            if self.broken:
                return
            self.broken = True
            pending, self.pending = self.pending, {}
        _warn(f"{why}; {len(pending)} job(s) and the rest run in this rank's own workers")
        self.session.close()
        for entry in pending.values():
            self._run_here(entry)

    def _run_here(self, entry: Pending) -> None:
        future, job_fn, args, kwargs = entry
        try:
            self._chain(self._fallback_pool().submit(job_fn, *args, **kwargs), future)
        except Exception as e:
            future.set_exception(e)

    def _fallback_pool(self) -> Any:
        with self.lock:
            if self.fallback is None:
                self.fallback = _original_pool(self.nprocs, self.pickler, self.kind, self.quiesce_requested)
            return self.fallback

    @staticmethod
    def _chain(source: "Future[Any]", target: "Future[Any]") -> None:
        def copy(f: "Future[Any]") -> None:
            if f.cancelled():
                target.cancel()
            elif f.exception() is not None:
                target.set_exception(f.exception())
            else:
                target.set_result(f.result())

        source.add_done_callback(copy)


def _warn(text: str) -> None:
    global _warned
    if not _warned or os.environ.get("CCPOOL_VERBOSE") == "1":
        sys.stderr.write(f"ccpool: {text}\n")
    _warned = True


def install(async_compile: Any) -> None:
    """Patches torch._inductor.async_compile (just imported): its pools are the node pool."""
    global _original_pool
    current = async_compile.SubprocPool
    if current is NodePool:
        return
    if not _env.service_socket():
        return
    _original_pool = current
    async_compile.SubprocPool = NodePool
