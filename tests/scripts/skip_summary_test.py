"""scripts/skip_summary.py against the JUnit XML a real ctest writes: skipped tests
(exit 125) are listed with their reasons, a skip that printed nothing is flagged,
googletest skips inside a passing binary are listed, passes and failures are not.
Exit codes: 0 pass, 1 fail, 125 skip (cmake/ctest missing)."""
import os
import shutil
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.environ.get("CCPOOL_SOURCE_DIR", ""), "scripts", "skip_summary.py")

PROJECT = r"""cmake_minimum_required(VERSION 3.21)
project(skips NONE)
enable_testing()
function(skip_test name script)
  add_test(NAME ${name} COMMAND sh -c "${script}")
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 125)
endfunction()
skip_test(a.harness "echo setting up; echo 'SKIPPED: needs root to run a client under another uid' >&2; exit 125")
skip_test(b.tool "echo 'SKIP: redis-server is not installed; scripts/setup-deps.sh installs it' >&2; exit 125")
skip_test(c.silent "exit 125")
skip_test(d.pass "echo fine")
skip_test(e.fail "echo 'SKIP-looking text in a failure'; exit 1")
add_test(NAME f.gtest COMMAND sh -c "printf '[ RUN      ] T.NoGpu\nx.cpp:3: Skipped\nno GPU on this machine\n\n[  SKIPPED ] T.NoGpu (0 ms)\n'")
"""


def main():
    for tool in ("cmake", "ctest"):
        if shutil.which(tool) is None:
            print(f"SKIP: {tool} is not installed", file=sys.stderr)
            return 125
    if not os.path.isfile(SCRIPT):
        print(f"FAIL: CCPOOL_SOURCE_DIR must name the source tree; {SCRIPT} is missing", file=sys.stderr)
        return 1
    work = tempfile.mkdtemp(prefix="skip_summary.")
    os.makedirs(os.path.join(work, "src"))
    with open(os.path.join(work, "src", "CMakeLists.txt"), "w") as f:
        f.write(PROJECT)
    build = os.path.join(work, "build")
    subprocess.run(["cmake", "-S", os.path.join(work, "src"), "-B", build], check=True, capture_output=True)
    junit = os.path.join(build, "junit.xml")
    ran = subprocess.run(["ctest", "-j2", "--output-junit", junit], cwd=build, capture_output=True, text=True)
    if ran.returncode == 0:
        print(f"FAIL: ctest passed with a failing test:\n{ran.stdout}", file=sys.stderr)
        return 1
    out = subprocess.run([sys.executable, SCRIPT, junit, os.path.join(build, "absent.xml")],
                         capture_output=True, text=True)
    expected = [
        "== skipped tests: 4 ==",
        "  SKIPPED a.harness: SKIPPED: needs root to run a client under another uid",
        "  SKIPPED b.tool: SKIP: redis-server is not installed; scripts/setup-deps.sh installs it",
        "  SKIPPED c.silent: (printed no reason: a silent skip)",
        "  SKIPPED f.gtest [T.NoGpu]: no GPU on this machine",
    ]
    if out.returncode != 0 or out.stdout.splitlines() != expected:
        print(f"FAIL: skip_summary.py exited {out.returncode} and printed:\n{out.stdout}{out.stderr}"
              f"expected:\n" + "\n".join(expected), file=sys.stderr)
        print(f"kept {work}", file=sys.stderr)
        return 1
    none = os.path.join(work, "none.xml")
    with open(none, "w") as f:
        f.write('<testsuite tests="1"><testcase name="x" status="run"><system-out>ok</system-out>'
                '</testcase></testsuite>')
    quiet = subprocess.run([sys.executable, SCRIPT, none], capture_output=True, text=True)
    if quiet.stdout != "== skipped tests: none ==\n":
        print(f"FAIL: with no skip it printed {quiet.stdout!r}", file=sys.stderr)
        return 1
    shutil.rmtree(work)
    print("skip_summary.py: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
