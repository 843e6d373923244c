"""scripts/demo.sh's second part: the main job with real torch.compile.

R ranks of tests/torch/support/model.py (three torch.compile'd graphs,
Inductor's CPU backend, or --device cuda) started together by torchrun, with
one Inductor cache dir for all ranks (Inductor's default):
  1. plain torchrun;
  2. the same job under `ccpool run`, a cold node;
  3. again under `ccpool run` with the Inductor cache emptied: a fresh node
     (or a new container) whose service already holds the graphs.
Each run is measured by bench/torch/seed.py's runner: Inductor's own
fxgraph_cache_miss summed over the ranks, every process's compile-phase CPU,
the service's builds and pass-throughs, and whether every rank matched eager.

Exits 1 when a rank's result differs from eager, a ccpool run compiles a
graph more than once per node, the fresh node compiles anything, a run is
killed at --run-timeout, or torch does not import; 125 when the venv has no
torch.

  python3 scripts/lib/torch_demo.py [--ranks 4] [--device cpu] [--build DIR] [--venv DIR]
"""
import argparse
import os
import shutil
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench", "torch"))
import seed  # noqa: E402

GRAPHS = 3  # model.py's pieces: mlp, norm, reduce


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=4, help="ranks started together (default 4)")
    ap.add_argument("--device", default="cpu", help="cpu, or cuda on a machine with a GPU (default cpu)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count(), help="ccpool run --jobs (default: CPUs)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--venv", default=os.environ.get("CCPOOL_VENV", os.path.join(ROOT, "build", "venv")))
    ap.add_argument("--run-timeout", type=float, default=600,
                    help="seconds after which a run's launcher and ranks are killed (default 600)")
    args = ap.parse_args()

    bench_args = seed.parser().parse_args(["--only", "graphs", "--graph-ranks", str(args.ranks), "--jobs",
                                           str(args.jobs), "--device", args.device, "--build", args.build,
                                           "--venv", args.venv, "--run-timeout", str(args.run_timeout)])
    python = os.path.join(args.venv, "bin", "python")
    installed = os.access(python, os.X_OK) and subprocess.run(
        [python, "-c", "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"]).returncode == 0
    if not installed:
        print(f"torch demo: skipped, no torch in {args.venv} (scripts/setup-deps.sh makes that venv; "
              f"{os.path.join(args.venv, 'ccpool-venv-failed')} says why it could not)")
        return 125
    probe = subprocess.run([python, "-c", "import torch"], capture_output=True, text=True)
    if probe.returncode != 0:
        print(f"torch demo: torch in {args.venv} does not import: "
              f"{(probe.stderr.strip().splitlines() or ['?'])[-1]}")
        return 1

    bench = seed.Bench(bench_args)
    env = {"NOGPU_COMPILE_SHIM": "1"} if args.device == "cpu" else {}
    extra = ("--device", args.device)
    r = args.ranks
    print(f"== real torch.compile: {r} ranks x {GRAPHS} graphs under torchrun, one Inductor cache dir, "
          f"{os.cpu_count()} cores (each run takes a minute or two)", flush=True)
    d = f"{bench.root}/ccpool"

    def run(label, where, via):
        row = bench.run(label, where, "model.py", r, via, env=env, extra_args=extra)
        if row.get("rc") or not row.get("ok"):
            tail = (seed.read(f"{where}.stderr.log", b"") or b"").decode(errors="replace").splitlines()[-20:]
            why = f"killed after {row['timed_out_s']:.0f} s" if row.get("timed_out_s") else f"exit {row.get('rc')}"
            print(f"-- {label}: {why}, the end of its log:\n" + "\n".join(tail), flush=True)
        return row

    try:
        print("== 1/3 plain torchrun", flush=True)
        plain = run("plain torchrun", f"{bench.root}/plain", False)
        print("== 2/3 ccpool run, cold node", flush=True)
        cold = run("ccpool run, cold", d, True)
        for sub in ("inductor", "out", "tmp"):
            shutil.rmtree(f"{d}/{sub}", ignore_errors=True)
        print("== 3/3 ccpool run, Inductor's cache emptied (a fresh node)", flush=True)
        fresh = run("ccpool run, fresh node", d, True)
    finally:
        shutil.rmtree(bench.root, ignore_errors=True)

    print()
    print(f"{'run':<24} {'wall':>7} {'compile CPU':>12} {'graph compiles':>15} {'C++ builds':>11} "
          f"{'probes':>7} {'= eager':>8}")
    for row in (plain, cold, fresh):
        svc = row.get("service", {})
        builds = "-" if svc.get("misses") is None else svc["misses"]
        probes = "-" if svc.get("passthrough") is None else svc["passthrough"]
        print(f"{row['run']:<24} {row['wall_s']:>6.1f}s {row.get('compile_cpu_s', 0):>11.1f}s "
              f"{row.get('fxgraph_cache_miss', '?'):>15} {builds:>11} {probes:>7} "
              f"{'yes' if row.get('ok') else 'NO':>8}")
    print(f"graph compiles: Inductor's fxgraph_cache_miss summed over the ranks ({GRAPHS} unique graphs). "
          "C++ builds: the service's misses, each run once for the node; probes: compiler runs that are "
          "not builds (g++ --version, -v, -E of a header), passed through. Plain torchrun's are not counted.")
    print("compile CPU: every process of the compile phase (the ranks, their compilers and compile workers, "
          "the service)")

    failed = [row["run"] for row in (plain, cold, fresh) if not row.get("ok") or row.get("rc")]
    problems = [f"{row['run']} compiled {row['fxgraph_cache_miss']} graphs, more than the {GRAPHS} unique ones"
                for row in (cold, fresh) if row.get("fxgraph_cache_miss", 0) > GRAPHS]
    fresh_builds = fresh.get("service", {}).get("misses")
    if fresh.get("fxgraph_cache_miss") or fresh_builds:
        problems.append(f"the fresh node compiled {fresh.get('fxgraph_cache_miss')} graphs and ran {fresh_builds} "
                        f"C++ builds, where its service held them all")
    if failed:
        print(f"torch demo: a rank failed or differed from eager in: {', '.join(failed)}")
    for problem in problems:
        print(f"torch demo: {problem}")
    if failed or problems:
        return 1
    print("torch demo: every rank matched eager; under ccpool each graph compiled at most once per node, "
          "and none on the fresh node")
    return 0


if __name__ == "__main__":
    sys.exit(main())
