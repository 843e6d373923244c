"""Triton's compile cache, shared by the whole node through the ccpool store
(docs/inductor-workers.md). Used in the node pool's workers only.

A worker runs jobs of every rank. Inductor points each job at its rank's own
Triton cache directory (TRITON_CACHE_DIR = <inductor cache>/triton/<device>),
so Triton's own cache never helps another rank. This cache manager keeps that
directory exactly as Triton would (Inductor's TritonBundler reads it), and
backs it with the node store: a group (the files of one compiled kernel:
IRs, PTX, cubin, metadata) missing from the rank's directory is looked up
under Triton's own key with CCPOOL.LEASE, so

- the group is in the store: its files are written into the rank's directory
  and Triton loads them (no LLVM, no ptxas);
- nobody compiles it: this worker compiles it and its put_group stores it;
- another worker compiles it now: wait for that one's group.

"The same kernel" is exactly what Triton's key says (its source, signature,
constants, options, target, Triton's and the backend's versions, the
environment variables Triton declares): the key does not hold the device
index or the kernel file's path, so the line table of a cubin another rank
compiled names that rank's kernel file (docs/inductor-workers.md, "What is
shared"). Dump and override managers (TRITON_KERNEL_DUMP, TRITON_KERNEL_OVERRIDE)
stay local.

A value read from the store is checked before any file is written: the
format, every name (a plain file name, no '/', no '..'), the sizes.
"""
from __future__ import annotations

import os
import struct
import threading
from typing import Dict, List, Optional, Tuple, Union

from triton.runtime.cache import FileCacheManager

from . import _env
from ._resp import Reply, RespConnection, RespError

MAGIC = b"ccpool-triton-group 1\n"
MAX_FILES = 64
MAX_NAME = 255
MAX_VALUE = 256 << 20
WAIT_S = 600.0

_lock = threading.Lock()
_conn: Optional[RespConnection] = None
_conn_pid = 0
_held: List[str] = []
counts: Dict[str, int] = {"triton_store_hits": 0, "triton_compiles": 0, "triton_store_puts": 0,
                          "triton_store_errors": 0}


def _connection() -> Optional[RespConnection]:
    global _conn, _conn_pid
    if _conn is not None and _conn_pid != os.getpid():
        forget_connection()  # a fork that was not a worker's: the parent's connection and leases
    if _conn is not None and not _conn.usable:  # an earlier call failed or was interrupted
        _conn = None
    if _conn is None:
        path = _env.resp_socket()
        if not path:
            return None
        try:
            _conn = RespConnection(path)
        except OSError:
            return None
        _conn_pid = os.getpid()
    return _conn


def forget_connection() -> None:
    """In a forked process: the parent's connection (if it had one) and its
    leases are not this process's; the next call opens its own."""
    global _conn
    if _conn is not None:
        _conn.close()  # this process's copy of the socket only
    _conn = None
    del _held[:]


def _after_fork_in_child() -> None:
    """A thread of the parent may have held the lock at the fork (waiting on
    a lease, up to its bound); in the child that thread does not exist and
    would never release it. The connection and leases are the parent's."""
    global _lock
    _lock = threading.Lock()
    forget_connection()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _call(*args: Union[str, bytes], timeout_s: Optional[float] = None) -> Reply:
    global _conn
    conn = _connection()
    if conn is None:
        return None
    try:
        return conn.call(*args, timeout_s=timeout_s)
    except RespError:
        counts["triton_store_errors"] += 1
        conn.close()
        _conn = None  # the front forgets a closed connection's leases
        return None


def encode(files: List[Tuple[str, bytes]]) -> bytes:
    out = bytearray(MAGIC)
    out += struct.pack("<I", len(files))
    for name, data in files:
        raw = name.encode()
        out += struct.pack("<H", len(raw)) + raw + struct.pack("<Q", len(data)) + data
    return bytes(out)


def decode(value: bytes) -> Optional[List[Tuple[str, bytes]]]:
    """The files of a stored group, or None for anything malformed."""
    if not value.startswith(MAGIC) or len(value) > MAX_VALUE:
        return None
    pos = len(MAGIC)
    try:
        (count,) = struct.unpack_from("<I", value, pos)
        pos += 4
        if count > MAX_FILES:
            return None
        files = []
        for _ in range(count):
            (n,) = struct.unpack_from("<H", value, pos)
            pos += 2
            name = value[pos:pos + n].decode()
            pos += n
            (size,) = struct.unpack_from("<Q", value, pos)
            pos += 8
            if (not name or n > MAX_NAME or "/" in name or "\0" in name or name in (".", "..")
                    or name.startswith("__grp__") or pos + size > len(value)):
                return None
            files.append((name, value[pos:pos + size]))
            pos += size
        return files if pos == len(value) else None
    except (struct.error, UnicodeDecodeError):
        return None


class NodeCacheManager(FileCacheManager):  # type: ignore[misc]  # triton ships no types
    """FileCacheManager (the rank's directory) backed by the node store."""

    def __init__(self, key: str, override: bool = False, dump: bool = False) -> None:
        super().__init__(key, override=override, dump=dump)
        self._local_only = override or dump

    def _store_key(self, filename: str) -> str:
        return f"ccpool:triton:{self.key}/{filename}"

    def get_group(self, filename: str) -> Optional[Dict[str, str]]:
        group: Optional[Dict[str, str]] = super().get_group(filename)
        if self._local_only or (group is not None and filename in group):
            return group
        wait_s = _env.seconds("CCPOOL_TRITON_WAIT_S", WAIT_S)
        with _lock:
            reply = _call("CCPOOL.LEASE", self._store_key(filename), str(int(wait_s * 1000)),
                          timeout_s=wait_s + 30)
            if reply == "LEAD":
                _held.append(self._store_key(filename))
                counts["triton_compiles"] += 1
        files = decode(reply) if isinstance(reply, bytes) else None
        if files is None:
            return None
        group = {name: str(self.put(data, name, binary=True)) for name, data in files}
        super().put_group(filename, group)
        counts["triton_store_hits"] += 1
        return group

    def put_group(self, filename: str, group: Dict[str, str]) -> str:
        path = str(super().put_group(filename, group))
        if self._local_only:
            return path
        files = []
        for name, child in sorted(group.items()):
            with open(child, "rb") as f:
                files.append((os.path.basename(name), f.read()))
        key = self._store_key(filename)
        with _lock:
            if _call("SET", key, encode(files)) == "OK":
                counts["triton_store_puts"] += 1
            if key in _held:
                _held.remove(key)
        return path


def release_all() -> None:
    """After each job: gives up the leases of groups this job did not store
    (its compile failed), so other workers compile them without waiting."""
    with _lock:
        keys = list(_held)
        _held.clear()
        for key in keys:
            _call("CCPOOL.RELEASE", key)


def install() -> bool:
    """Makes Triton use NodeCacheManager in this process, unless the user
    chose a cache manager (TRITON_CACHE_MANAGER) or there is no front."""
    if os.environ.get("TRITON_CACHE_MANAGER") or not _env.resp_socket():
        return False
    os.environ["TRITON_CACHE_MANAGER"] = "ccpool._triton_cache:NodeCacheManager"
    return True
