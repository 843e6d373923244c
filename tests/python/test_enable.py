"""ccpool.enable(): the job environment comes from `ccpool env --shell json`,
the interpreter is re-executed once when that is safe and never otherwise,
and what could not be changed is said. The unit cases use a fake binary; the
whole-path cases run the build's ccpool with a service of their own and count
its requests."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from typing import Any, Dict, Iterator, List

import pytest

from ccpool import _enable, _locate

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "service", "support"))
from service_fixture import stop_with_cli  # noqa: E402

BUILD_DIR = os.environ["CCPOOL_BUILD_DIR"]
PYTHON_DIR = os.path.join(BUILD_DIR, "share", "ccpool", "python")
CCPOOL = os.path.join(BUILD_DIR, "bin", "ccpool")


# --- unit: a fake ccpool binary -------------------------------------------

def fake_binary(tmp_path: Any, monkeypatch: pytest.MonkeyPatch, stdout: str, rc: int = 0,
                stderr: str = "") -> str:
    """A `ccpool` that records its argv in args.txt and prints `stdout`."""
    path = os.path.join(tmp_path, "ccpool")
    with open(path, "w") as f:
        f.write(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {tmp_path}/args.txt\n"
                f"cat <<'EOF'\n{stdout}\nEOF\nprintf '%s' {json.dumps(stderr)} >&2\nexit {rc}\n")
    os.chmod(path, 0o755)
    monkeypatch.setattr(_locate, "ccpool_binary", lambda: path)
    return path


def test_sets_exactly_what_ccpool_env_computes(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEPT", "mine")
    settings = {"CCPOOL_SOCKET": "/s/sock", "KEPT": "mine", "TORCHINDUCTOR_COMPILE_THREADS": "4"}
    fake_binary(tmp_path, monkeypatch, json.dumps(settings))
    result = _enable.enable(jobs=4, ranks=2, frameworks_cache=True, resp_port=6400, python_hooks=False,
                            store_dir="/d", mem_budget="1G", reexec=False)
    args = open(os.path.join(tmp_path, "args.txt")).read().split("\n")[:-1]
    assert args == ["env", "--shell", "json", "--start-service", "--jobs", "4", "--ranks", "2",
                    "--frameworks-cache", "--resp-port", "6400", "--no-python-hooks", "--dir", "/d",
                    "--mem-budget", "1G"]
    assert result.environment == settings
    assert result.changed == {"CCPOOL_SOCKET": "/s/sock", "TORCHINDUCTOR_COMPILE_THREADS": "4"}
    assert os.environ["CCPOOL_SOCKET"] == "/s/sock" and os.environ["TORCHINDUCTOR_COMPILE_THREADS"] == "4"
    assert result.socket == "/s/sock"
    assert (result.reexecuted, result.shim_loaded, result.hooks) == (False, False, False)
    assert len(result.not_changed) == 1 and "reexec=False" in result.not_changed[0]
    assert _enable.enable() is result  # later calls: the first result


def test_failure_names_the_command_and_what_it_said(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    binary = fake_binary(tmp_path, monkeypatch, "", rc=1, stderr="ccpool: the service did not come up; see x.log")
    with pytest.raises(_enable.EnableError) as e:
        _enable.enable()
    assert f"`{binary} env --shell json --start-service` failed with exit code 1" in str(e.value)
    assert "see x.log" in str(e.value)


def test_output_that_is_not_settings_is_refused(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_binary(tmp_path, monkeypatch, '{"A": 1}')
    with pytest.raises(_enable.EnableError, match="not a JSON object of strings"):
        _enable.enable()


def test_missing_binary_is_an_enable_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> str:
        raise FileNotFoundError("the ccpool binary ... is not at /x; reinstall ccpool")
    monkeypatch.setattr(_locate, "ccpool_binary", missing)
    with pytest.raises(_enable.EnableError, match="reinstall ccpool"):
        _enable.enable()


def test_ccpool_disable_does_nothing(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_binary(tmp_path, monkeypatch, "{}")
    monkeypatch.setenv("CCPOOL_DISABLE", "1")
    result = _enable.enable()
    assert result.environment == {} and not result.hooks
    assert not os.path.exists(os.path.join(tmp_path, "args.txt"))
    assert "CCPOOL_DISABLE=1" in result.not_changed[0]


class Exec(Exception):
    pass


def test_reexec_runs_the_same_command_line_with_sys_executable(tmp_path: Any,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    fake_binary(tmp_path, monkeypatch, json.dumps({"LD_PRELOAD": "/x/libccpool-shim.so"}))
    calls: List[List[str]] = []

    def fake_exec(path: str, argv: List[str]) -> None:
        calls.append([path, *argv])
        raise Exec()
    monkeypatch.setattr(_enable, "_exec", fake_exec)
    monkeypatch.setattr(_enable, "reexec_refusal", lambda reexec, reexecuted: None)
    monkeypatch.setattr(sys, "orig_argv", ["python3", "-X", "dev", "train.py", "--lr", "1"])
    with pytest.raises(Exec):
        _enable.enable()
    assert calls == [[sys.executable, sys.executable, "-X", "dev", "train.py", "--lr", "1"]]
    assert os.environ[_enable.REEXEC_MARKER] == "1"
    assert os.environ["LD_PRELOAD"] == "/x/libccpool-shim.so"


def test_a_failed_exec_is_reported(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_binary(tmp_path, monkeypatch, "{}")

    def failing_exec(path: str, argv: List[str]) -> None:
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(_enable, "_exec", failing_exec)
    monkeypatch.setattr(_enable, "reexec_refusal", lambda reexec, reexecuted: None)
    result = _enable.enable(python_hooks=False)
    assert "failed (Permission denied)" in result.not_changed[0]
    assert _enable.REEXEC_MARKER not in os.environ


@pytest.mark.parametrize("situation, expected", [
    ("reexec_off", "reexec=False"),
    ("reexecuted", "shim is not loaded"),
    ("torch", "torch was imported before ccpool.enable()"),
    ("ipykernel", "notebook"),
    ("ps1", "interactive interpreter"),
    ("stdin", "standard input"),
])
def test_when_the_interpreter_is_not_reexecuted(monkeypatch: pytest.MonkeyPatch, situation: str,
                                                expected: str) -> None:
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)
    monkeypatch.delitem(sys.modules, "IPython", raising=False)
    monkeypatch.delattr(sys, "ps1", raising=False)
    monkeypatch.setattr(sys, "argv", ["train.py"])
    if situation == "torch":
        monkeypatch.setitem(sys.modules, "torch", types.ModuleType("torch"))
    elif situation == "ipykernel":
        monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))
    elif situation == "ps1":
        monkeypatch.setattr(sys, "ps1", ">>> ", raising=False)
    elif situation == "stdin":
        monkeypatch.setattr(sys, "argv", ["-"])
    refusal = _enable.reexec_refusal(situation != "reexec_off", situation == "reexecuted")
    assert refusal is not None and expected in refusal


def test_a_plain_script_may_be_reexecuted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)
    monkeypatch.delitem(sys.modules, "IPython", raising=False)
    monkeypatch.delattr(sys, "ps1", raising=False)
    monkeypatch.setattr(sys, "argv", ["train.py"])
    assert _enable.reexec_refusal(True, False) is None


def test_torch_imported_first_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    config = types.ModuleType("torch._inductor.config")
    config.compile_threads = 32  # type: ignore[attr-defined]
    config.fx_graph_remote_cache = None  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch._inductor.config", config)
    monkeypatch.setenv("TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE", "1")
    notes = _enable.torch_notes({"TORCHINDUCTOR_COMPILE_THREADS": "4"}, hooks=True)
    assert len(notes) == 2
    assert "compile_threads=32, not 4" in notes[0]
    assert "FX graphs are not compiled once per node" in notes[1]
    config.compile_threads = 4  # type: ignore[attr-defined]
    config.fx_graph_remote_cache = True  # type: ignore[attr-defined]
    assert _enable.torch_notes({"TORCHINDUCTOR_COMPILE_THREADS": "4"}, hooks=True) == []


# --- whole path: the build's ccpool and a service of the test's own --------

@pytest.fixture
def job(tmp_path: Any) -> Iterator[Dict[str, str]]:
    """An environment with no ccpool settings, the package on PYTHONPATH and
    a private service socket; the service is stopped afterwards."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("CCPOOL_") and not k.startswith("TORCHINDUCTOR_")
           and k not in ("LD_PRELOAD", "PYTHONPATH")}
    socket = os.path.join(tmp_path, "s", "sock")
    env.update(PYTHONPATH=PYTHON_DIR, CCPOOL_SOCKET=socket, CCPOOL_DIR=os.path.join(tmp_path, "store"),
               CCPOOL_JOBS="2", PYTHONDONTWRITEBYTECODE="1")
    with open(os.path.join(tmp_path, "k.c"), "w") as f:
        f.write("int k(int x) { return x * 3; }\n")
    yield env
    stop_with_cli(socket, env, CCPOOL)


def status(env: Dict[str, str]) -> Dict[str, Any]:
    out = subprocess.run([CCPOOL, "status", "--json", "--socket", env["CCPOOL_SOCKET"]], env=env,
                         capture_output=True, text=True, timeout=60, check=True).stdout
    value: Dict[str, Any] = json.loads(out)
    return value


SCRIPT = """\
import json, os, subprocess, sys
print("start", os.getpid(), flush=True)
import ccpool
result = ccpool.enable()
subprocess.run(COMPILE, check=True)
print("result", json.dumps(result._asdict()), flush=True)
"""


def run_script(tmp_path: Any, env: Dict[str, str], compile_argv: List[str], prelude: str = "",
               argv: List[str] = ["script.py"]) -> subprocess.CompletedProcess[str]:
    with open(os.path.join(tmp_path, "script.py"), "w") as f:
        f.write(prelude + SCRIPT.replace("COMPILE", repr(compile_argv)))
    return subprocess.run([sys.executable, *argv], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)


def parse(out: str) -> Dict[str, Any]:
    line = [s for s in out.splitlines() if s.startswith("result ")]
    assert len(line) == 1, out
    value: Dict[str, Any] = json.loads(line[0][len("result "):])
    return value


def test_script_is_reexecuted_once_and_its_own_compiles_use_the_service(tmp_path: Any,
                                                                         job: Dict[str, str]) -> None:
    r = run_script(tmp_path, job, ["gcc", "-c", "k.c", "-o", "k.o"])
    assert r.returncode == 0, r.stderr
    starts = [s for s in r.stdout.splitlines() if s.startswith("start ")]
    assert len(starts) == 2 and starts[0] == starts[1], r.stdout  # the same pid, run twice
    result = parse(r.stdout)
    assert (result["reexecuted"], result["shim_loaded"], result["hooks"]) == (True, True, True)
    assert result["not_changed"] == [] and r.stderr == ""
    assert result["socket"] == job["CCPOOL_SOCKET"]
    assert result["environment"]["LD_PRELOAD"].endswith("/libccpool-shim.so")
    assert result["environment"]["TORCHINDUCTOR_COMPILE_THREADS"] == "2"
    s = status(job)
    assert (s["requests"], s["misses"]) == (1, 1), s  # gcc, exec'd by the script itself
    assert os.path.getsize(os.path.join(tmp_path, "k.o")) > 0


def test_dash_c_program_is_reexecuted(tmp_path: Any, job: Dict[str, str]) -> None:
    code = ("import ccpool, json, subprocess; r = ccpool.enable(); "
            "subprocess.run(['gcc', '-c', 'k.c', '-o', 'k.o'], check=True); print(json.dumps(r._asdict()))")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=job, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["reexecuted"] is True
    assert status(job)["requests"] == 1


def test_after_torch_import_only_children_use_the_service(tmp_path: Any, job: Dict[str, str]) -> None:
    """A stand-in `torch` imported first: no re-exec; this process's own gcc
    runs locally, a child shell's gcc goes to the service."""
    os.makedirs(os.path.join(tmp_path, "fake", "torch"))
    open(os.path.join(tmp_path, "fake", "torch", "__init__.py"), "w").close()
    job["PYTHONPATH"] += os.pathsep + os.path.join(tmp_path, "fake")
    r = run_script(tmp_path, job, ["gcc", "-c", "k.c", "-o", "k.o"], prelude="import torch\n")
    assert r.returncode == 0, r.stderr
    assert len([s for s in r.stdout.splitlines() if s.startswith("start ")]) == 1
    result = parse(r.stdout)
    assert (result["reexecuted"], result["shim_loaded"], result["hooks"]) == (False, False, True)
    assert len(result["not_changed"]) == 1
    assert "torch was imported before ccpool.enable()" in result["not_changed"][0]
    assert "ccpool.enable(): this process's own compiler execs" in r.stderr
    assert status(job)["requests"] == 0  # this process's own gcc ran locally
    r = run_script(tmp_path, job, ["sh", "-c", "gcc -c k.c -o k3.o"], prelude="import torch\n")
    assert r.returncode == 0, r.stderr
    assert status(job)["requests"] == 1  # the shell, a child of the enabled process, routed its gcc


def test_interactive_interpreter_gets_hooks_in_process(tmp_path: Any, job: Dict[str, str]) -> None:
    lines = "import ccpool, json\nr = ccpool.enable()\nprint('R', json.dumps(r._asdict()))\n"
    r = subprocess.run([sys.executable, "-i", "-q"], input=lines, cwd=tmp_path, env=job, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    result = json.loads([s for s in r.stdout.splitlines() if "R {" in s][0].split("R ", 1)[1])
    assert (result["reexecuted"], result["shim_loaded"], result["hooks"]) == (False, False, True)
    assert "interactive interpreter" in result["not_changed"][0]


def test_python_dash_m_ccpool_is_the_cli(job: Dict[str, str]) -> None:
    r = subprocess.run([sys.executable, "-m", "ccpool", "--version"], env=job, capture_output=True, text=True,
                       timeout=60)
    import ccpool
    assert (r.returncode, r.stdout.strip()) == (0, f"ccpool {ccpool.__version__}")
    r = subprocess.run([sys.executable, "-m", "ccpool", "bogus"], env=job, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "unknown command 'ccpool bogus'" in r.stderr
