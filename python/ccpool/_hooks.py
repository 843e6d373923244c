"""Installs ccpool's hooks into this interpreter: as soon as (or if already)
Inductor's modules are imported, their remote caches go to the node store with
single flight (_graph_cache) and their compile-worker pool becomes the node's
(_pool). Nothing of torch is imported here: the hooks cost nothing in a
process that never imports it.

`install()` is idempotent. It never raises: a hook that cannot be installed
leaves Inductor's own behaviour in place and says why once on stderr.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys
from types import ModuleType
from typing import Callable, Dict, List

from . import _env

_installed = False
_problems: List[str] = []


def _patch_remote_cache(module: ModuleType) -> None:
    from . import _graph_cache
    _graph_cache.install(module)


def _patch_output_graph(module: ModuleType) -> None:
    from . import _graph_cache
    _graph_cache.install_release(module)


def _patch_compile_fx(module: ModuleType) -> None:
    from . import _graph_cache
    _graph_cache.install_inner_release(module)


def _patch_codecache(module: ModuleType) -> None:
    from . import _graph_cache
    _graph_cache.install_bypass_release(module)


def _patch_async_compile(module: ModuleType) -> None:
    from . import _pool
    _pool.install(module)


PATCHES: Dict[str, Callable[[ModuleType], None]] = {
    "torch._inductor.remote_cache": _patch_remote_cache,
    "torch._dynamo.output_graph": _patch_output_graph,
    "torch._inductor.compile_fx": _patch_compile_fx,
    "torch._inductor.codecache": _patch_codecache,
    "torch._inductor.async_compile": _patch_async_compile,
}

# Environment defaults that must be in place before torch._inductor.config and
# torch._functorch.config are imported (they read them once). A value the user
# set is kept.
ENV_DEFAULTS = {
    "TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE": "1",
    "TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE": "1",
}


def _apply(name: str, module: ModuleType) -> None:
    try:
        PATCHES[name](module)
    except Exception as e:  # never break the user's program
        _problems.append(f"{name}: {type(e).__name__}: {e}")
        sys.stderr.write(f"ccpool: could not hook {name} ({type(e).__name__}: {e}); "
                         "Inductor keeps its own behaviour there\n")


class _PatchFinder(importlib.abc.MetaPathFinder):
    """Wraps the loader of each module in PATCHES so the patch runs right
    after the module's own code."""

    def find_spec(self, name, path, target=None):  # type: ignore[no-untyped-def]
        if name not in PATCHES:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        real_exec = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            real_exec(module)
            _apply(name, module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def install() -> List[str]:
    """Hooks this interpreter (idempotent). Returns the names of the modules
    that were already imported and patched now (empty before `import torch`)."""
    global _installed
    if _installed or _env.disabled():
        return []
    _installed = True
    for name, value in ENV_DEFAULTS.items():
        os.environ.setdefault(name, value)
    patched_now = []
    for name in PATCHES:
        module = sys.modules.get(name)
        if module is not None:
            _apply(name, module)
            patched_now.append(name)
    sys.meta_path.insert(0, _PatchFinder())
    return patched_now


def problems() -> List[str]:
    return list(_problems)
