"""A compile worker of the node pool (docs/inductor-workers.md).

The service starts it, with a rank's interpreter and environment, as
  python -c '<drop sys.path[0]; run main>' --pickler=MODULE.CLASS --torch-key=B64 [--zygote=1]
with its channel to the service on fd 3 (workers/worker_wire.h has the frame
layout). It sets itself up the way Inductor's own sidecar does
(torch/_inductor/compile_worker/__main__.py). With --zygote=1 it is then the
environment's zygote (_zygote.py): it forks the workers, each of which goes on
below as a started one does, set up already. A worker runs jobs one at a time:
each is the pickled callable a rank's SubprocPool.submit would have sent to
its own workers, and its answer is pickled exactly as Inductor's worker
pickles it (a job's exception becomes _SubprocExceptionInfo), so the rank
cannot tell the difference. After every job the environment is restored
(jobs set TORCHINDUCTOR_CACHE_DIR and friends for their rank) and the
Triton leases the job did not fill are released.
"""
from __future__ import annotations

import base64
import importlib
import json
import os
import resource
import signal
import socket
import struct
import sys
import traceback
from typing import Any, Dict, List, Optional, Tuple

from ._socket_io import recv_exact

CHANNEL_FD = 3
HELLO, JOB, RESULT, EXIT = 1, 2, 3, 4
HEADER = struct.Struct("<B3xQI")  # kind, 3 zero bytes, job id, payload length
MAX_PAYLOAD = (64 << 20) + (64 << 10)


class Channel:
    def __init__(self, fd: int) -> None:
        self.sock = socket.socket(fileno=fd)

    def send(self, kind: int, job_id: int, payload: bytes) -> None:
        self.sock.sendall(HEADER.pack(kind, job_id, len(payload)) + payload)

    def receive(self) -> Optional[Tuple[int, int, bytes]]:
        header = recv_exact(self.sock, HEADER.size)
        if header is None:
            return None
        kind, job_id, length = HEADER.unpack(header)
        if length > MAX_PAYLOAD:
            raise ValueError(f"the service sent a {length}-byte frame")
        payload = recv_exact(self.sock, length) if length else b""
        return None if payload is None else (kind, job_id, payload)


def parse_args(argv: List[str]) -> Dict[str, str]:
    options = {}
    for a in argv:
        if a.startswith("--") and "=" in a:
            name, value = a[2:].split("=", 1)
            options[name] = value
    return options


def make_pickler(qualified: Optional[str]) -> Any:
    from torch._inductor.compile_worker.subproc_pool import SubprocPickler

    if not qualified:
        return SubprocPickler()
    module, name = qualified.rsplit(".", 1)
    cls = getattr(importlib.import_module(module), name)
    if not (isinstance(cls, type) and issubclass(cls, SubprocPickler)):
        raise TypeError(f"{qualified} is not a SubprocPickler")
    return cls()


def set_up(options: Dict[str, str]) -> Any:
    """What Inductor's sidecar does before it forks its workers."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the service ends workers, never a terminal
    from . import _triton_cache

    _triton_cache.install()  # before Triton reads its knobs
    from torch._inductor import async_compile
    from torch._inductor.codecache import torch_key
    from torch._inductor.compile_worker import utils as worker_utils

    try:
        from torch._inductor.runtime.compile_tasks import _set_triton_ptxas_path
        _set_triton_ptxas_path()
    except ImportError:  # older torch sets it in the job
        pass
    if options.get("torch-key"):
        torch_key.set(base64.b64decode(options["torch-key"]))
    if hasattr(async_compile, "pre_fork_setup"):
        async_compile.pre_fork_setup()
    worker_utils._IN_TOPLEVEL_PROCESS = False  # Inductor checks it in its workers
    return make_pickler(options.get("pickler"))


def peak_rss_kb() -> int:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return int(own + children)


def run_job(pickler: Any, payload: bytes) -> bytes:
    from torch._inductor.compile_worker.subproc_pool import _SubprocExceptionInfo

    try:
        job = pickler.loads(payload)
        result = job()
    except Exception:
        result = _SubprocExceptionInfo(traceback.format_exc())
    try:
        return bytes(pickler.dumps(result))
    except Exception:
        return bytes(pickler.dumps(_SubprocExceptionInfo(traceback.format_exc())))


def versions() -> Dict[str, Optional[str]]:
    import torch
    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    return {"python": sys.executable, "torch": torch.__version__, "triton": triton_version}


def main(argv: List[str]) -> int:
    options = parse_args(argv)
    pickler = set_up(options)
    if options.get("zygote") == "1":
        from . import _zygote

        return _zygote.run(CHANNEL_FD, lambda: serve(pickler), versions())
    return serve(pickler)


def serve(pickler: Any) -> int:
    """A worker's loop: hello, then one job at a time until the service says exit."""
    from . import _triton_cache

    _triton_cache.forget_connection()  # a forked worker must not share the zygote's
    channel = Channel(CHANNEL_FD)
    hello = dict(versions(), pid=os.getpid())
    channel.send(HELLO, 0, json.dumps(hello).encode())
    base_env = dict(os.environ)
    while True:
        frame = channel.receive()
        if frame is None or frame[0] == EXIT:
            return 0
        kind, job_id, payload = frame
        if kind != JOB:
            return 2
        before = dict(_triton_cache.counts)
        answer = run_job(pickler, payload)
        _triton_cache.release_all()
        os.environ.clear()
        os.environ.update(base_env)
        stats = {"rss_kb": peak_rss_kb(),
                 "counts": {k: v - before.get(k, 0) for k, v in _triton_cache.counts.items()}}
        encoded = json.dumps(stats).encode()
        channel.send(RESULT, job_id, struct.pack("<I", len(encoded)) + encoded + answer)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
