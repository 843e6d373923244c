#!/usr/bin/env python3
"""One simulated training rank: compiles every kernel in KERNEL_DIR as a
one-step shared object, the way TorchInductor's C++ backend does, from a
32-thread pool (each thread runs subprocess.run, i.e. vfork+exec)."""
import concurrent.futures
import os
import subprocess
import sys

def compile_one(cxx, src, out, extra):
    cmd = [cxx, src, "-O2", "-shared", "-fPIC", "-fopenmp", "-o", out] + extra
    r = subprocess.run(cmd, capture_output=True)
    if r.returncode != 0:
        sys.stderr.write(r.stderr.decode(errors="replace"))
    return r.returncode

def main():
    kernel_dir, out_dir, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
    mode = sys.argv[4] if len(sys.argv) > 4 else "so"
    cxx = os.environ.get("CXX", "g++")
    os.makedirs(out_dir, exist_ok=True)
    srcs = sorted(f for f in os.listdir(kernel_dir) if f.endswith(".cpp"))
    jobs = []
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        for s in srcs:
            src = os.path.join(kernel_dir, s)
            if mode == "obj":
                out = os.path.join(out_dir, s[:-4] + ".o")
                jobs.append(pool.submit(compile_one, cxx, src, out, ["-c"]))
            else:
                out = os.path.join(out_dir, s[:-4] + ".so")
                jobs.append(pool.submit(compile_one, cxx, src, out, []))
    failed = sum(1 for j in jobs if j.result() != 0)
    sys.exit(1 if failed else 0)

if __name__ == "__main__":
    main()
