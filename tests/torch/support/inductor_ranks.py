"""One rank of the worker-pool workload (issue 24): Inductor's own
AsyncCompile.triton compiles the fixture kernels (tests/torch/fixtures/triton)
for this rank's GPU, device index = LOCAL_RANK, in Inductor's compile-worker
pool (plain: this rank's sidecar and its forked workers; under `ccpool run`:
the node pool of the service).

There is no GPU here, so the rank checks what a worker returned (the pickled
CachingAutotuner, before the parent would load it onto a device): the device
index is this rank's, every config has a cubin for the kernel's target, the
cubin names the kernel and its bytes match the cubin file the result points
at. NOGPU_COMPILE_SHIM=1 and support/ on PYTHONPATH are required
(support/sitecustomize.py).

Writes --out-dir/rank<R>.json: per kernel the configs, the cubin sha256s and
paths, the checks, and the time from the first submit to the last result.
--hold-file PATH: after the pool is ready and every kernel is submitted,
wait until PATH exists before collecting (a test interrupts ranks there).
"""
import argparse
import glob
import hashlib
import json
import os
import sys
import time

RANK = int(os.environ.get("LOCAL_RANK", os.environ.get("RANK", "0")))
ENV_THREADS_AT_START = os.environ.get("TORCHINDUCTOR_COMPILE_THREADS")
HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures", "triton")
RESULT_TIMEOUT_S = 420  # a hang guard on a loaded 2-core machine, not a speed bound


def rank_source(path):
    with open(path) as f:
        src = f.read()
    marker = "DeviceProperties(type='cuda', index=0,"
    if src.count(marker) != 1:
        raise SystemExit(f"{path}: expected one {marker!r}")
    return src.replace(marker, f"DeviceProperties(type='cuda', index={RANK},")


def check_result(name, kernel):
    """What the rank's parent would load, checked without a device."""
    device = kernel.device_props
    configs = []
    for cr in kernel.compile_results:
        k = cr.kernel
        raw = getattr(k, "cubin_raw", None)
        path = getattr(k, "cubin_path", None)
        on_disk = None
        if path and os.path.exists(path):
            with open(path, "rb") as f:
                on_disk = f.read()
        cubin = raw if raw is not None else on_disk
        configs.append({
            "kind": type(cr).__name__,
            "cubin_sha256": hashlib.sha256(cubin).hexdigest() if cubin else None,
            "cubin_path": path,
            "is_elf": bool(cubin) and cubin[:4] == b"\x7fELF",
            "names_kernel": bool(cubin) and name.encode() in cubin,
            "matches_file": on_disk is None or raw is None or on_disk == raw,
        })
    return {"device_index": device.index, "cc": device.cc, "configs": configs}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--hold-file")
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)

    import torch  # noqa: F401
    import torch._inductor.config as ic
    from torch._inductor.async_compile import AsyncCompile

    started = time.monotonic()
    cpu_started = time.process_time()
    AsyncCompile.warm_pool()
    AsyncCompile.wait_pool_ready(timeout=RESULT_TIMEOUT_S)
    ready_s = time.monotonic() - started
    ac = AsyncCompile()
    futures = {}
    t0 = time.monotonic()
    for path in sorted(glob.glob(os.path.join(FIXTURES, "triton_*.py"))):
        name = os.path.basename(path)[:-3]
        futures[name] = ac.triton(name, rank_source(path), "cuda")
    if args.hold_file:
        while not os.path.exists(args.hold_file):
            time.sleep(0.05)
    kernels = {}
    for name, fut in futures.items():
        # The worker's raw result (LambdaFuture.future): the parent's own
        # get_result() would load the cubins onto a GPU.
        kernel, _elapsed_us = fut.future.result(timeout=RESULT_TIMEOUT_S)
        kernels[name] = check_result(name, kernel)
    compile_s = time.monotonic() - t0
    pool = AsyncCompile.process_pool()
    result = {"rank": RANK, "pid": os.getpid(), "env_compile_threads": ENV_THREADS_AT_START,
              "compile_threads": ic.compile_threads, "pool": type(pool).__module__ + "." + type(pool).__name__,
              "ready_s": ready_s, "compile_s": compile_s, "kernels": kernels,
              "cpu_compile_s": time.process_time() - cpu_started}
    with open(os.path.join(args.out_dir, f"rank{RANK}.json"), "w") as f:
        json.dump(result, f)
    print(json.dumps({"rank": RANK, "pool": result["pool"], "compile_s": compile_s}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
