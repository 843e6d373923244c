"""Loaded by every Python process of a torch test (PYTHONPATH): records each
subprocess the process starts (argv, cwd) as one JSON line in
$CCPOOL_TORCH_EXECLOG. That is the test's independent view of what Inductor
and Triton ran (ranks, compile workers), to compare with the service's
counters. Appends of one short line are atomic (O_APPEND, one write)."""
import json
import os
import sys

_LOG = os.environ.get("CCPOOL_TORCH_EXECLOG")

if _LOG:
    def _record(event, args):
        if event != "subprocess.Popen":
            return
        try:
            exe, argv, cwd, _env = args
            if isinstance(argv, (str, bytes)):
                argv = [argv]
            line = json.dumps({"pid": os.getpid(), "argv": [os.fsdecode(a) for a in argv],
                               "cwd": os.fsdecode(cwd) if cwd else os.getcwd()}) + "\n"
            fd = os.open(_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode())
            finally:
                os.close(fd)
        except Exception:  # never break the program under test
            pass

    sys.addaudithook(_record)


def _after_import(module_name, patch):
    """Runs patch(module) in this process right after the module named
    module_name has run its own code, whoever imports it."""
    import importlib.abc
    import importlib.util

    class _AfterImport(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name != module_name:
                return None
            sys.meta_path.remove(self)  # find the real module with the other finders
            try:
                spec = importlib.util.find_spec(name)
            finally:
                sys.meta_path.insert(0, self)
            if spec is None or spec.loader is None:
                return spec
            real_exec = spec.loader.exec_module

            def exec_module(module):
                real_exec(module)
                patch(module)

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, _AfterImport())


# NOGPU_COMPILE_SHIM=1: Inductor's Triton compile path without a GPU
# (tests/torch/fixtures/triton/README.md). The one call that needs a device,
# triton_helpers.set_driver_to_gpu(), becomes a no-op as soon as its module is
# imported, in every Python process of the job: ranks, Inductor's sidecar and
# its workers, ccpool's workers (they all get this directory on PYTHONPATH).
if os.environ.get("NOGPU_COMPILE_SHIM") == "1":
    def _no_gpu_driver(module):
        module.set_driver_to_gpu = lambda: None

    _after_import("torch._inductor.runtime.triton_helpers", _no_gpu_driver)


# CCPOOL_TEST_HIDE_REDIS=1: this interpreter behaves as a venv without the
# `redis` package (most users' venvs): `import redis` fails.
if os.environ.get("CCPOOL_TEST_HIDE_REDIS") == "1":
    import importlib.abc

    class _NoRedis(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name == "redis" or name.startswith("redis."):
                raise ModuleNotFoundError(f"No module named {name!r} (CCPOOL_TEST_HIDE_REDIS=1)", name=name)
            return None

    sys.meta_path.insert(0, _NoRedis())


# TEST_WORKER_GATE=DIR: every Triton compile job (Inductor's
# _worker_compile_triton, in whichever process runs it) first creates
# DIR/running.<pid>, then waits for DIR/go: a test interrupts a rank or the
# job while a compile runs. (Not CCPOOL_*: ccpool keeps its own variables
# from its workers.)
if os.environ.get("TEST_WORKER_GATE"):
    import time

    _TASKS = "torch._inductor.runtime.compile_tasks"
    _GATE = os.environ["TEST_WORKER_GATE"]

    def _gate_compiles(module):
        real = module._worker_compile_triton

        def gated(*args, **kwargs):
            open(os.path.join(_GATE, f"running.{os.getpid()}"), "w").close()
            while not os.path.exists(os.path.join(_GATE, "go")):
                time.sleep(0.05)
            return real(*args, **kwargs)

        # Pickled by reference, as the original is: the same name in the same module.
        gated.__module__, gated.__name__, gated.__qualname__ = _TASKS, real.__name__, real.__qualname__
        module._worker_compile_triton = gated

    _after_import(_TASKS, _gate_compiles)
