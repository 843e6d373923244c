"""ccpool.enable(): from inside a script, what `ccpool run` does for a
launcher (docs/python.md).

    import ccpool
    ccpool.enable()     # first thing, before `import torch`
    import torch

1. The service runs: `ccpool env --start-service` starts it with this
   package's own binary unless it already answers.
2. os.environ gets exactly the job settings that `ccpool env --shell json`
   computes (the shim on LD_PRELOAD, the socket and the client, the compile
   thread caps, the hooks' PYTHONPATH entry); a variable the user set is kept,
   as under `ccpool run`. Every child process started from now on is a job
   process.
3. This process's own compiler execs (Inductor's C++ builds run from the rank
   itself) need the shim loaded, and LD_PRELOAD cannot be added to a running
   process. So enable() re-executes the interpreter once, in place (same pid,
   same sys.orig_argv), with that environment, when that is safe: torch is not
   imported yet and the program is a script, `-c` or `-m` (not an interactive
   interpreter, a notebook kernel or standard input). The new interpreter runs
   the program from its first line; its enable() finds everything in place.
   CCPOOL_ENABLE_REEXEC marks it, so this happens at most once.
4. The Python hooks are installed in this interpreter (ccpool._hooks):
   Inductor's compile workers in the node pool, graph compiles once per node.

What could not be done is said on stderr and in Enabled.not_changed.
"""
from __future__ import annotations

import os
import sys
from typing import Dict, List, NamedTuple, NoReturn, Optional, Tuple

from . import _locate

REEXEC_MARKER = "CCPOOL_ENABLE_REEXEC"
SHIM_NAME = "libccpool-shim.so"


class EnableError(RuntimeError):
    """The service or the job environment could not be set up. The message
    names the command that failed, what it said and the fix."""


class Enabled(NamedTuple):
    """What ccpool.enable() did in this interpreter."""

    socket: str  # the service socket (CCPOOL_SOCKET)
    environment: Dict[str, str]  # the job settings in effect, as `ccpool env --shell json` computes them
    changed: Dict[str, str]  # the variables this call set in os.environ
    reexecuted: bool  # this interpreter is the one enable() re-executed
    shim_loaded: bool  # compiler execs of this process go through the service
    hooks: bool  # ccpool's Python hooks are installed in this interpreter
    not_changed: Tuple[str, ...]  # what could not be changed, one sentence each (also on stderr)


_result: Optional[Enabled] = None


def enable(*, jobs: Optional[int] = None, ranks: Optional[int] = None, frameworks_cache: bool = False,
           resp_port: Optional[int] = None, python_hooks: bool = True, store_dir: Optional[str] = None,
           mem_budget: Optional[str] = None, reexec: bool = True) -> Enabled:
    """Makes this process and its children a ccpool job, as `ccpool run`
    makes a launcher's (see the module's doc). Call it first thing, before
    `import torch`: it may re-execute the interpreter, which runs the program
    again from its first line.

    The options are `ccpool run`'s: `jobs` (--jobs), `ranks` (--ranks; else
    from LOCAL_WORLD_SIZE / SLURM_NTASKS_PER_NODE), `frameworks_cache`,
    `resp_port`, `python_hooks=False` (--no-python-hooks), and for a service
    this starts, `store_dir` (--dir) and `mem_budget` (--mem-budget, e.g.
    "16G"). `reexec=False` never re-executes (this process's own compiler
    execs then run without the service).

    Idempotent: later calls return the first call's result. CCPOOL_DISABLE=1
    makes it do nothing. Raises EnableError when the service cannot be
    started or the environment cannot be computed."""
    global _result
    if _result is not None:
        return _result
    reexecuted = os.environ.pop(REEXEC_MARKER, None) == "1"
    if os.environ.get("CCPOOL_DISABLE") == "1":
        _result = _report(Enabled("", {}, {}, reexecuted, shim_loaded(), False,
                                  ("CCPOOL_DISABLE=1 is set: ccpool stays off (no service, variables or hooks)",)))
        return _result
    try:
        binary = _locate.ccpool_binary()
    except FileNotFoundError as e:
        raise EnableError(str(e)) from None
    flags = env_flags(jobs=jobs, ranks=ranks, frameworks_cache=frameworks_cache, resp_port=resp_port,
                      python_hooks=python_hooks, store_dir=store_dir, mem_budget=mem_budget)
    environment = job_environment(binary, flags)
    changed = {name: value for name, value in environment.items() if os.environ.get(name) != value}
    os.environ.update(changed)

    not_changed: List[str] = []
    shim = shim_loaded()
    if not shim:
        refusal = reexec_refusal(reexec, reexecuted)
        if refusal is None:
            refusal = _reexec()  # returns only when the exec failed
        not_changed.append(f"this process's own compiler execs (pid {os.getpid()}) run without the service: "
                           f"{refusal}, and LD_PRELOAD cannot be added to a running process; "
                           "the child processes it starts from now on use the service")
    hooks = False
    if python_hooks:
        from . import _hooks
        _hooks.install()
        hooks = _hooks._installed
    not_changed.extend(torch_notes(environment, hooks))
    _result = _report(Enabled(environment.get("CCPOOL_SOCKET", ""), environment, changed, reexecuted, shim,
                              hooks, tuple(not_changed)))
    return _result


def env_flags(*, jobs: Optional[int], ranks: Optional[int], frameworks_cache: bool, resp_port: Optional[int],
              python_hooks: bool, store_dir: Optional[str], mem_budget: Optional[str]) -> List[str]:
    """enable()'s options as `ccpool env` flags."""
    flags: List[str] = []
    if jobs is not None:
        flags += ["--jobs", str(jobs)]
    if ranks is not None:
        flags += ["--ranks", str(ranks)]
    if frameworks_cache:
        flags.append("--frameworks-cache")
    if resp_port is not None:
        flags += ["--resp-port", str(resp_port)]
    if not python_hooks:
        flags.append("--no-python-hooks")
    if store_dir is not None:
        flags += ["--dir", store_dir]
    if mem_budget is not None:
        flags += ["--mem-budget", mem_budget]
    return flags


def job_environment(binary: str, flags: List[str]) -> Dict[str, str]:
    """Starts the service unless it runs and returns the job settings:
    `ccpool env --shell json --start-service FLAGS`, run with os.environ."""
    import json
    import subprocess

    argv = [binary, "env", "--shell", "json", "--start-service", *flags]
    command = " ".join(argv)
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise EnableError(f"cannot run `{command}`: {e}; reinstall ccpool") from None
    if done.returncode != 0:
        said = done.stderr.strip() or "(nothing on stderr)"
        raise EnableError(f"`{command}` failed with exit code {done.returncode}: {said}")
    try:
        settings = json.loads(done.stdout)
    except ValueError:
        settings = None
    if not isinstance(settings, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                 for k, v in settings.items()):
        raise EnableError(f"`{command}` printed {done.stdout[:200]!r}, not a JSON object of strings; "
                          "the binary does not match this package: reinstall ccpool")
    return settings


def shim_loaded() -> bool:
    """Whether the shim is mapped into this process (it was on LD_PRELOAD
    when the process started)."""
    try:
        with open("/proc/self/maps") as maps:
            return any(line.rstrip("\n").endswith("/" + SHIM_NAME) for line in maps)
    except OSError:
        return False


def reexec_refusal(reexec: bool, reexecuted: bool) -> Optional[str]:
    """Why this interpreter must not be re-executed, or None when it may."""
    if not reexec:
        return "ccpool.enable(reexec=False)"
    if reexecuted:
        return (f"the interpreter was re-executed with LD_PRELOAD={os.environ.get('LD_PRELOAD', '')!r} "
                "but the shim is not loaded (the dynamic loader said why on stderr)")
    if "torch" in sys.modules:
        return "torch was imported before ccpool.enable() (call it before `import torch`)"
    if "ipykernel" in sys.modules or "IPython" in sys.modules:
        return "this is a notebook or IPython kernel, which is not re-executed"
    if hasattr(sys, "ps1") or sys.flags.interactive:
        return "this is an interactive interpreter, which is not re-executed"
    if not getattr(sys, "orig_argv", None):
        return "sys.orig_argv is unknown (Python before 3.10)"
    if not sys.argv or sys.argv[0] in ("", "-"):
        return "the program came from standard input, which cannot be read again"
    if not sys.executable:
        return "sys.executable is unknown"
    return None


def _reexec() -> str:
    """Replaces this interpreter with a new one running the same command line
    with os.environ. argv[0] is sys.executable, so a venv's interpreter finds
    its venv again. Returns why not only when the exec failed."""
    os.environ[REEXEC_MARKER] = "1"
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        _exec(sys.executable, [sys.executable, *sys.orig_argv[1:]])
    except OSError as e:
        os.environ.pop(REEXEC_MARKER, None)
        return f"re-executing {sys.executable} failed ({e.strerror})"


def _exec(path: str, argv: List[str]) -> NoReturn:
    os.execv(path, argv)


def torch_notes(environment: Dict[str, str], hooks: bool) -> List[str]:
    """What parts of torch imported before enable() already decided."""
    notes: List[str] = []
    config = sys.modules.get("torch._inductor.config")
    if config is not None:
        threads = environment.get("TORCHINDUCTOR_COMPILE_THREADS")
        current = getattr(config, "compile_threads", None)
        if threads is not None and str(current) != threads:
            notes.append(f"torch._inductor.config was imported before ccpool.enable(): Inductor keeps "
                         f"compile_threads={current}, not {threads}")
        if hooks and os.environ.get("TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE") == "1" and \
                getattr(config, "fx_graph_remote_cache", None) is not True:
            notes.append("torch._inductor.config was imported before ccpool.enable(): its FX graphs are not "
                         "compiled once per node (fx_graph_remote_cache is "
                         f"{getattr(config, 'fx_graph_remote_cache', None)})")
    functorch = sys.modules.get("torch._functorch.config")
    if functorch is not None and hooks and os.environ.get("TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE") == "1" and \
            getattr(functorch, "enable_remote_autograd_cache", None) is not True:
        notes.append("torch._functorch.config was imported before ccpool.enable(): AOTAutograd entries are not "
                     "compiled once per node")
    async_compile = sys.modules.get("torch._inductor.async_compile")
    if async_compile is not None:
        try:
            started = async_compile.AsyncCompile.process_pool.cache_info().currsize > 0
        except Exception:  # another torch: nothing known
            started = False
        if started:
            notes.append("Inductor's own compile-worker pool was started before ccpool.enable(): this process "
                         "keeps it; its workers are not the node pool's")
    return notes


def _report(result: Enabled) -> Enabled:
    for line in result.not_changed:
        sys.stderr.write(f"ccpool.enable(): {line}\n")
    sys.stderr.flush()
    return result
