"""ccpool's interpreter hook. `ccpool run` and `ccpool env` put this directory
first on PYTHONPATH, so every Python process of the job imports it at start,
before any of the user's code (and so before `import torch`). It installs
ccpool's hooks (ccpool/_hooks.py: a meta-path finder, nothing imported) and
then imports the next `sitecustomize` on sys.path, if there is one, so a
sitecustomize of the user's, the venv's or a test harness still runs.
CCPOOL_PYTHON_HOOKS=0 (or CCPOOL_DISABLE=1) turns the hooks off."""
import os
import sys


def _ccpool_boot() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))  # holds the ccpool package
    try:
        if os.environ.get("CCPOOL_PYTHON_HOOKS") != "0" and os.environ.get("CCPOOL_DISABLE") != "1":
            if root not in sys.path:
                sys.path.append(root)
            from ccpool import _hooks
            _hooks.install()
    except Exception as e:  # never break the interpreter
        sys.stderr.write(f"ccpool: Python hooks not installed ({type(e).__name__}: {e})\n")
    _chain(here)


def _chain(here: str) -> None:
    """Imports the next sitecustomize on sys.path. This directory leaves
    sys.path for good: it holds nothing else, and the path a sitecustomize
    of the user's sets up stays as that one leaves it."""
    import importlib

    me = sys.modules.pop("sitecustomize", None)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    try:
        importlib.import_module("sitecustomize")
    except ModuleNotFoundError as e:
        if e.name != "sitecustomize":
            sys.stderr.write(f"ccpool: the next sitecustomize failed ({type(e).__name__}: {e})\n")
        elif me is not None:
            sys.modules["sitecustomize"] = me
    except Exception as e:
        sys.stderr.write(f"ccpool: the next sitecustomize failed ({type(e).__name__}: {e})\n")


_ccpool_boot()
