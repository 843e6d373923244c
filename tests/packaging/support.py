"""Shared by the packaging tests: a scratch directory kept on failure, the
build tree's settings, scripts/package.sh, and unittest's exit codes (125 =
skip, with the reason printed).

CTest sets CCPOOL_SOURCE_DIR and CCPOOL_BUILD_DIR (and CCPOOL_VENV, the torch
venv of tests/torch)."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SOURCE = os.environ["CCPOOL_SOURCE_DIR"]
BUILD = os.environ["CCPOOL_BUILD_DIR"]
TESTS_ROOT = os.environ.get("CCPOOL_TEST_TMP", "/tmp/ccpool-tests")
HANG_GUARD_S = 900  # only catches hangs: a cold wheel build on 2 busy cores takes minutes

_scratch = []


def scratch(name):
    os.makedirs(TESTS_ROOT, exist_ok=True)
    path = tempfile.mkdtemp(prefix=f"{name}.", dir=TESTS_ROOT)
    os.chmod(path, 0o700)  # the service's socket directory lives in it
    _scratch.append(path)
    return path


def run(argv, **kwargs):
    """Runs argv; on a non-zero exit the assertion shows the command and its output."""
    kwargs.setdefault("timeout", HANG_GUARD_S)
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kwargs)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} exited {r.returncode}:\n{r.stdout[-6000:]}")
    return r.stdout


def cmake_cache(name):
    """A value of the build tree's CMakeCache.txt, or ''."""
    with open(os.path.join(BUILD, "CMakeCache.txt")) as f:
        for line in f:
            key, _, value = line.rstrip("\n").partition("=")
            if key.split(":")[0] == name:
                return value
    return ""


def project_version():
    with open(os.path.join(SOURCE, "CMakeLists.txt")) as f:
        for line in f:
            if line.startswith("project(ccpool VERSION "):
                return line.split()[2]
    raise AssertionError("no project(ccpool VERSION ...) line in CMakeLists.txt")


def package(what, out, *settings):
    """scripts/package.sh WHAT into `out`; a missing tool (PyPI unreachable:
    exit 3) is a skip. The wheel is built like the build tree (same compilers,
    generator and compiler launcher) in <build>-wheel, kept between runs, so
    its compiles are ccache hits of the main build's when ccache is its
    launcher."""
    env = dict(os.environ, OUT=out, BUILD_DIR=BUILD, CCPOOL_WHEEL_CCACHE="0")
    argv = [os.path.join(SOURCE, "scripts", "package.sh"), what, *settings]
    if what == "wheel":
        argv.append(f"--config-settings=build-dir={BUILD}-wheel")
        for name in ("CMAKE_C_COMPILER", "CMAKE_CXX_COMPILER", "CMAKE_C_COMPILER_LAUNCHER",
                     "CMAKE_CXX_COMPILER_LAUNCHER"):
            if cmake_cache(name):
                argv.append(f"--config-settings=cmake.define.{name}={cmake_cache(name)}")
        env["CMAKE_GENERATOR"] = cmake_cache("CMAKE_GENERATOR")
    r = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=HANG_GUARD_S)
    if r.returncode == 3:
        raise unittest.SkipTest(f"scripts/package.sh {what}: a build tool is missing: {r.stdout.strip()[-500:]}")
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} exited {r.returncode}:\n{r.stdout[-8000:]}")
    return r.stdout


def tree(root):
    """Every file and directory under root, relative to it."""
    found = set()
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            found.add(os.path.relpath(os.path.join(dirpath, name), root))
    return found


def main():
    suite = unittest.TestLoader().loadTestsFromNames(sys.argv[1:], sys.modules["__main__"])
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stderr).run(suite)
    if not result.wasSuccessful():
        for d in _scratch:
            print(f"kept test directory: {d}", file=sys.stderr)
        sys.exit(1)
    for d in _scratch:
        shutil.rmtree(d, ignore_errors=True)
    if result.skipped:
        for _, why in result.skipped:
            print(f"SKIPPED: {why}", file=sys.stderr)
        sys.exit(125)
    sys.exit(0)
