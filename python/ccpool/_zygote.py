"""The zygote of one worker environment (docs/inductor-workers.md, "Zygotes").

The service starts it like a worker, with "--zygote=1". Set up once (as
Inductor's compile_worker sidecar is before it forks its pool), it greets on
its channel (fd 3) and then answers the service's frames (workers/worker_wire.h):

  fork   (the new worker's channel attached, SCM_RIGHTS) -> forked {"pid"} or {"error"}
  reap   (job id = a pid it forked) -> kills that worker's process group, reaps
         it, reaped {"status", "rss_kb"} or {"error"}
  exit   -> it exits

A forked worker leads its own process group, dies with the zygote
(PR_SET_PDEATHSIG), and has its channel on fd 3; it then runs `serve()`, the
worker's own loop. The zygote reaps nothing unasked: until the service asks, a
worker's pid and process group cannot be reused by another process.
Standard library only: the stand-in worker of the C++ tests uses it too.
"""
from __future__ import annotations

import array
import ctypes
import json
import os
import signal
import socket
import struct
import sys
import traceback
from typing import Any, Callable, Dict, List, NoReturn, Optional, Set, Tuple

from ._socket_io import recv_exact

HEADER = struct.Struct("<B3xQI")  # kind, 3 zero bytes, id, payload length
HELLO, EXIT, FORK, FORKED, REAP, REAPED = 1, 4, 5, 6, 7, 8
MAX_PAYLOAD = 64 << 10  # the service sends the zygote empty frames
PR_SET_PDEATHSIG = 1


def _receive(sock: socket.socket) -> Optional[Tuple[int, int, bytes, List[int]]]:
    """One frame and the descriptors that came with it; None at EOF."""
    fds: List[int] = []
    data = b""
    while len(data) < HEADER.size:
        chunk, ancillary, _, _ = sock.recvmsg(HEADER.size - len(data), socket.CMSG_SPACE(4 * 4))
        for level, kind, raw in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.extend(array.array("i", raw[:len(raw) - len(raw) % 4]))
        if not chunk:
            for fd in fds:
                os.close(fd)
            return None
        data += chunk
    kind, ident, length = HEADER.unpack(data)
    if length > MAX_PAYLOAD:
        raise ValueError(f"the service sent the zygote a {length}-byte frame")
    payload = recv_exact(sock, length) if length else b""
    return None if payload is None else (kind, ident, payload, fds)


def _send(sock: socket.socket, kind: int, ident: int, answer: Dict[str, Any]) -> None:
    payload = json.dumps(answer).encode()
    sock.sendall(HEADER.pack(kind, ident, len(payload)) + payload)


def _prctl() -> Callable[..., int]:
    """prctl(2), resolved before any fork."""
    prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    return prctl


def _die_with_parent(prctl: Callable[..., int], parent: int) -> None:
    if prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        os._exit(1)  # a worker that might outlive its zygote never starts
    if os.getppid() != parent:  # the zygote died before the prctl
        os._exit(1)


def _fork(sock: socket.socket, channel_fd: int, fd: int, serve: Callable[[], int],
          prctl: Callable[..., int]) -> int:
    zygote = os.getpid()
    sys.stdout.flush()  # else every child writes what the zygote left buffered
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setpgid(0, 0)
            _die_with_parent(prctl, zygote)
            sock.detach()  # fd channel_fd becomes the worker's own channel below
            os.dup2(fd, channel_fd)
            os.close(fd)
            code = serve()
        except BaseException:
            traceback.print_exc()
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    try:
        os.setpgid(pid, pid)  # as the child does: the group exists before the service hears of it
    except OSError:
        pass
    return pid


def _reap(children: Set[int], pid: int) -> Dict[str, Any]:
    if pid not in children:
        return {"error": f"pid {pid} is not a worker this zygote forked"}
    try:
        os.killpg(pid, signal.SIGKILL)  # what the worker left behind (ptxas)
    except OSError:
        pass
    try:
        _, status, usage = os.wait4(pid, 0)
    except OSError as e:
        return {"error": f"wait4({pid}): {e}"}
    finally:
        children.discard(pid)
    return {"status": status, "rss_kb": usage.ru_maxrss}


def run(channel_fd: int, serve: Callable[[], int], hello: Dict[str, Any]) -> int:
    """The zygote's loop; `serve` is what a forked worker runs (its exit status)."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # zombies stay until the service asks
    sock = socket.socket(fileno=channel_fd)
    _send(sock, HELLO, 0, dict(hello, pid=os.getpid(), zygote=True))
    children: Set[int] = set()
    prctl = _prctl()
    while True:
        frame = _receive(sock)
        if frame is None:
            _exit_now(0)
        kind, ident, _, fds = frame
        if kind == FORK and len(fds) == 1:
            try:
                pid = _fork(sock, channel_fd, fds[0], serve, prctl)
                children.add(pid)
                answer: Dict[str, Any] = {"pid": pid}
            except OSError as e:
                answer = {"error": f"fork: {e}"}
            finally:
                os.close(fds[0])
            _send(sock, FORKED, ident, answer)
            continue
        for fd in fds:
            os.close(fd)
        if kind == REAP:
            _send(sock, REAPED, ident, _reap(children, ident))
        elif kind == EXIT:
            _exit_now(0)
        else:
            _exit_now(2)


def _exit_now(code: int) -> NoReturn:
    """Exits without the interpreter's shutdown (atexit handlers of torch and
    Triton, threads): the service waits for this exit."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
