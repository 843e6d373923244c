#!/usr/bin/env python3
"""Runs the workloads of scripts/bench.sh and writes bench/results/raw.json
(every measured row) and meta.json (machine, versions, the exact command).
   driver.py --bin-dir BUILD --out bench/results [--quick] [--only a,b,c,d] [--work DIR]"""
import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import log, machine_info, settle, write_json  # noqa: E402
import contenders as cmod  # noqa: E402
from wl_a import workload_a  # noqa: E402
from wl_b import workload_b  # noqa: E402
from wl_cd import workload_c, workload_d  # noqa: E402


class Ctx:
    pass


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", required=True, help="build dir with bin/ccpool, bin/ccpool-client, lib/libccpool-shim.so")
    p.add_argument("--out", required=True)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--tiny", action="store_true", help="smoke-test sizes (develop the script)")
    p.add_argument("--only", default="a,b,c,d")
    p.add_argument("--contenders", default=",".join(c.name for c in cmod.ALL))
    p.add_argument("--reps", type=int, default=1)
    p.add_argument("--cold-pairs", type=int, default=2,
                   help="workload c: more cold builds of plain and ccpool, in pairs of alternating order (0 with --tiny)")
    p.add_argument("--work", default="")
    p.add_argument("--projects", default="", help="workload c: only these trees (comma-separated)")
    p.add_argument("--sources", default="", help="third-party trees for workload c (scripts/fetch-bench-sources.sh)")
    p.add_argument("--command", default="")
    a = p.parse_args()

    ctx = Ctx()
    ctx.quick, ctx.reps, ctx.tiny = a.quick or a.tiny, a.reps, a.tiny
    ctx.cold_pairs = 0 if a.tiny else max(0, a.cold_pairs)
    ctx.cores = len(os.sched_getaffinity(0))
    ctx.ccpool = os.path.join(a.build, "bin", "ccpool")
    ctx.client = os.path.join(a.build, "bin", "ccpool-client")
    ctx.sources = a.sources
    ctx.projects = set(a.projects.split(",")) if a.projects else None
    ctx.work = a.work or tempfile.mkdtemp(prefix="ccpool-bench.", dir="/tmp")
    os.makedirs(ctx.work, exist_ok=True)
    only = set(a.only.split(","))
    results = []
    raw_path = os.path.join(a.out, "raw.json")
    ctx.save = lambda: write_json(raw_path, {"rows": results})
    meta = machine_info(ctx.ccpool)
    meta.update({"quick": a.quick, "reps": a.reps, "cold_pairs": ctx.cold_pairs, "command": a.command or " ".join(sys.argv),
                 "workloads": sorted(only)})
    write_json(os.path.join(a.out, "meta.json"), meta)
    log(f"work dir {ctx.work}; {ctx.cores} cores; workloads {sorted(only)}")

    # Tools' own environments must not leak in (a user's CCPOOL_SOCKET, LD_PRELOAD, ccache config).
    for v in ("LD_PRELOAD", "CCPOOL_SOCKET", "CCPOOL_DIR", "CCPOOL_REMOTE", "CCACHE_DIR", "SCCACHE_DIR",
              "TORCHINDUCTOR_COMPILE_THREADS", "CXX", "CC", "MAKEFLAGS"):
        os.environ.pop(v, None)
    contenders = cmod.make_all(ctx, set(a.contenders.split(",")))
    t_start = time.monotonic()
    try:
        meta["settle"] = {}
        for key, fn in (("a", workload_a), ("b", workload_b), ("c", workload_c), ("d", workload_d)):
            if key in only:
                waited = meta["settle"][key] = settle()
                log(f"== workload {key} (waited {waited['waited_s']} s for a quiet machine: "
                    f"{'quiet' if waited['quiet'] else 'still busy'}, load {waited['load1_after']:.1f})")
                fn(ctx, contenders, results)
    finally:
        for c in contenders:
            c.stop()
        ctx.save()
        meta["load_at_end"] = os.getloadavg()
        meta["duration_s"] = round(time.monotonic() - t_start, 1)
        write_json(os.path.join(a.out, "meta.json"), meta)
        if not a.work:
            shutil.rmtree(ctx.work, ignore_errors=True)
    log(f"wrote {raw_path} ({len(results)} rows)")


if __name__ == "__main__":
    main()
