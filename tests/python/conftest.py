"""pytest set-up for the ccpool Python package (tests/python/run.sh runs it).

The package is imported from the build tree (<build>/share/ccpool/python, a
link to python/ccpool), where it finds <build>/bin/ccpool as it finds its
binaries after an install. CCPOOL_BUILD_DIR names the build tree."""
from __future__ import annotations

import os
import sys
from typing import Iterator

import pytest

BUILD_DIR = os.environ.get("CCPOOL_BUILD_DIR", "")
if not BUILD_DIR:
    raise SystemExit("CCPOOL_BUILD_DIR is not set: run tests/python/run.sh (CTest sets it)")
PYTHON_DIR = os.path.join(BUILD_DIR, "share", "ccpool", "python")
sys.path.insert(0, PYTHON_DIR)

from ccpool import _enable  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_enable(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts with enable() not yet called and a job-free environment."""
    monkeypatch.setattr(_enable, "_result", None)
    for name in ("CCPOOL_SOCKET", "CCPOOL_DIR", "CCPOOL_DISABLE", "CCPOOL_PYTHON_HOOKS", "LD_PRELOAD",
                 _enable.REEXEC_MARKER):
        monkeypatch.delenv(name, raising=False)
    yield
