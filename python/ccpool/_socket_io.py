"""Reading a stream socket whole: the rank side (_pool.py) and the worker
(_worker.py) read their frames with it."""
from __future__ import annotations

import socket
from typing import List, Optional


def recv_exact(sock: socket.socket, n: int) -> Optional[bytes]:
    """The next n bytes of sock, read in chunks of at most 1 MiB; None when
    the peer closes the connection first."""
    chunks: List[bytes] = []
    left = n
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
