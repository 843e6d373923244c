"""A minimal RESP2 client for the service's Redis-protocol front (resp.sock).

ccpool's Python hooks run inside the user's interpreter, where the `redis`
package is often not installed, and need only four commands (GET, SET,
CCPOOL.LEASE, CCPOOL.RELEASE) over a Unix socket. Standard library only.
Every reply is bounded (kMaxReply) before it is buffered, and every read has
a deadline: a front that stops answering is a miss, never a hang.

A call that does not return its reply (an error, a timeout, or an exception
such as KeyboardInterrupt raised while it waited) ends the connection: a
reply may still be owed on it, and a later call would read that reply as its
own. A connection is also refused in any process but the one that opened it:
after a fork, parent and child would read each other's replies.
"""
from __future__ import annotations

import os
import socket
from typing import List, Optional, Union

Reply = Union[bytes, str, int, None, List["Reply"]]

K_MAX_REPLY = 512 << 20  # the front's own value bound is 256 MiB
K_MAX_ARRAY = 1 << 16


class RespError(Exception):
    """An error reply ("-ERR ...") or a broken connection."""


class RespConnection:
    """One connection; not thread-safe (callers keep one per thread)."""

    def __init__(self, path: str, timeout_s: float = 10.0) -> None:
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout_s)
        try:
            self._sock.connect(path)
        except OSError:
            self._sock.close()
            raise
        self._buf = bytearray()
        self._timeout_s = timeout_s
        self._pid = os.getpid()
        self._broken = False

    def close(self) -> None:
        self._broken = True
        self._sock.close()

    @property
    def usable(self) -> bool:
        """False once a call failed or closed it, and in any other process."""
        return not self._broken and self._pid == os.getpid()

    def call(self, *args: Union[str, bytes], timeout_s: Optional[float] = None) -> Reply:
        wire = bytearray(b"*%d\r\n" % len(args))
        for a in args:
            b = a.encode() if isinstance(a, str) else bytes(a)
            wire += b"$%d\r\n%s\r\n" % (len(b), b)
        if self._pid != os.getpid():
            raise RespError(f"ccpool front: this connection was opened by process {self._pid}, "
                            f"not this one ({os.getpid()})")
        if self._broken:
            raise RespError("ccpool front: this connection ended with an earlier call")
        self._sock.settimeout(self._timeout_s if timeout_s is None else timeout_s)
        try:
            self._sock.sendall(wire)
            return self._reply(0)
        except (OSError, ValueError) as e:
            self.close()
            raise RespError(f"ccpool front: {e}") from e
        except BaseException:
            self.close()  # RespError, KeyboardInterrupt, ...: the reply may still be owed
            raise

    def _line(self) -> bytes:
        while True:
            end = self._buf.find(b"\r\n")
            if end >= 0:
                line = bytes(self._buf[:end])
                del self._buf[:end + 2]
                return line
            if len(self._buf) > 64 * 1024:
                raise RespError("ccpool front: reply line longer than 64 KiB")
            self._fill()

    def _fill(self) -> None:
        chunk = self._sock.recv(1 << 20)
        if not chunk:
            raise RespError("ccpool front closed the connection")
        self._buf += chunk

    def _reply(self, depth: int) -> Reply:
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode(errors="replace")
        if kind == b"-":
            raise RespError(rest.decode(errors="replace"))
        if kind == b":":
            return int(rest)
        if kind == b"_":
            return None
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            if n > K_MAX_REPLY:
                raise RespError(f"ccpool front: a {n}-byte reply is over the {K_MAX_REPLY}-byte bound")
            while len(self._buf) < n + 2:
                self._fill()
            data = bytes(self._buf[:n])
            del self._buf[:n + 2]
            return data
        if kind == b"*" and depth < 4:
            n = int(rest)
            if n < 0:
                return None
            if n > K_MAX_ARRAY:
                raise RespError(f"ccpool front: a {n}-element reply is over the {K_MAX_ARRAY} bound")
            return [self._reply(depth + 1) for _ in range(n)]
        raise RespError(f"ccpool front: unexpected reply {line[:40]!r}")
