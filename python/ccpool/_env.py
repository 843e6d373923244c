"""Where ccpool's Python hooks find the service, from the environment that
`ccpool run` / `ccpool env` / `ccpool.enable()` set."""
from __future__ import annotations

import os
from typing import Optional


def disabled() -> bool:
    return os.environ.get("CCPOOL_DISABLE") == "1" or os.environ.get("CCPOOL_PYTHON_HOOKS") == "0"


def service_socket() -> Optional[str]:
    return os.environ.get("CCPOOL_SOCKET") or None


def resp_socket() -> Optional[str]:
    """The front's Unix socket: CCPOOL_RESP_SOCKET, else resp.sock beside a
    service socket named `sock` (the default layout, docs/service.md)."""
    explicit = os.environ.get("CCPOOL_RESP_SOCKET")
    if explicit:
        return explicit
    sock = service_socket()
    if sock and os.path.basename(sock) == "sock":
        return os.path.join(os.path.dirname(sock), "resp.sock")
    return None


def seconds(name: str, default: float) -> float:
    """A positive number of seconds from the environment; `default` when unset."""
    text = os.environ.get(name)
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name}={text!r} is not a number of seconds; unset it or fix it") from None
    if value <= 0:
        raise ValueError(f"{name}={text!r} must be positive; unset it or fix it")
    return value
