#!/usr/bin/env python3
"""The launcher of workload a: starts R simulated ranks (scripts/lib/rank.py)
at once, like torchrun, and fails if any rank failed.
   launch_ranks.py RANKS KERNEL_DIR OUT_DIR THREADS so|obj"""
import os
import subprocess
import sys

ranks, kernels, out, threads, mode = sys.argv[1:6]
rank_py = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "lib", "rank.py")
procs = []
for r in range(int(ranks)):
    env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r))
    procs.append(subprocess.Popen([sys.executable, rank_py, kernels, os.path.join(out, f"rank{r}"), threads, mode],
                                  env=env))
sys.exit(1 if any(p.wait() != 0 for p in procs) else 0)
