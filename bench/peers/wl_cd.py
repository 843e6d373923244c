"""Workload c: real CMake+Ninja projects (ccpool's own tree, googletest from
/usr/src/googletest) built cold then warm (clean + build) by each contender,
every object compared with the plain cold build's. Workload e: the bytes each
cache holds after c, against the raw object bytes. Workload d: ccpool service
throughput: hits/s with 1, 8 and 64 concurrent clients (ccpool-client, what the
shim execs), the service's RSS; ccache and sccache hit loops alongside."""
import filecmp
import os
import subprocess
import time

from common import children_cpu, du, fresh_dir, log, proc_cpu, proc_rss, run, ROOT

PROJECTS = {
    "ccpool": (ROOT, ["-DCCPOOL_BUILD_TESTS=OFF", "-DCCPOOL_BUILD_BENCH=OFF"],
               {"tiny": ["ccpool_base"], "quick": ["ccpool_base", "ccpool_ipc"],
                "full": ["ccpool"]}),
    "googletest": ("/usr/src/googletest", [], {"tiny": ["gtest"], "quick": [], "full": []}),
}


def objects(build):
    out = {}
    for d, _, files in os.walk(build):
        for f in files:
            if f.endswith(".o"):
                p = os.path.join(d, f)
                out[os.path.relpath(p, build)] = p
    return out


def compare(ref, build):
    mine = objects(build)
    same = [k for k in ref if k in mine and filecmp.cmp(ref[k], mine[k], shallow=False)]
    diff = sorted(k for k in ref if k in mine and k not in same)
    return {"objects": len(ref), "identical": len(same), "different": len(diff),
            "missing": len([k for k in ref if k not in mine]), "different_names": diff[:10]}


def build_once(ctx, c, build, targets):
    cmd = ["cmake", "--build", build, "-j", str(ctx.cores)]
    for t in targets:
        cmd += ["--target", t]
    pid = c.server_pid()
    cpu0_server = proc_cpu(pid) if pid else 0.0
    before = c.counters()
    cpu0, t0 = children_cpu(), time.monotonic()
    r = run(c.wrap(cmd), env=c.env(), check=False)
    wall = time.monotonic() - t0
    cpu = children_cpu() - cpu0
    pid = c.server_pid()
    if pid:
        cpu += proc_cpu(pid) - cpu0_server
    after = c.counters()
    row = {"wall_s": round(wall, 4), "cpu_s": round(cpu, 3), "rc": r.returncode, "load1": round(os.getloadavg()[0], 1),
           "counters": {k: after[k] - before.get(k, 0) for k in after}}
    if r.returncode:
        row["error"] = r.stdout.decode(errors="replace")[-2000:]
        log(f"  FAILED: {row['error'][-600:]}")
    return row


def workload_c(ctx, contenders, results):
    cs = [c for c in contenders if c.name != "capped"]  # a make -jN build has no per-rank pool to cap
    mode = "tiny" if ctx.tiny else "quick" if ctx.quick else "full"
    for rep in range(ctx.reps):
        for proj, (src, args, targets) in PROJECTS.items():
            if not os.path.isdir(src):
                log(f"c {proj}: {src} missing, skipped")
                continue
            builds = {}
            for c in cs:
                c.reset()
                build = fresh_dir(os.path.join(ctx.work, "c", proj, c.name))
                launcher = c.launcher()
                extra = [f"-DCMAKE_CXX_COMPILER_LAUNCHER={launcher}",
                         f"-DCMAKE_C_COMPILER_LAUNCHER={launcher}"] if launcher else []
                run(["cmake", "-S", src, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"] + args + extra,
                    env=c.env())
                builds[c.name] = build
            # Read the sources and the standard headers once, so the first cold build (plain's) does not
            # pay for a cold page cache that the others then enjoy.
            subprocess.run(f"find {src} /usr/include -type f -exec cat {{}} + > /dev/null", shell=True)
            ref = None
            for phase in ("cold", "warm"):
                for c in cs:
                    if phase == "warm" and c.name == "plain" and ctx.quick:
                        continue  # without a cache a rebuild is the cold build again; --quick saves it
                    build = builds[c.name]
                    if phase == "warm":
                        run(["cmake", "--build", build, "--target", "clean"])
                    row = build_once(ctx, c, build, targets[mode])
                    if c.name == "plain" and phase == "cold":
                        ref = objects(build)
                    row.update(compare(ref or {}, build))
                    row.update({"workload": "c", "rep": rep, "project": proj, "contender": c.name, "phase": phase})
                    results.append(row)
                    log(f"c {proj} {phase} {c.name:8} {row['wall_s']:7.2f}s cpu {row['cpu_s']:6.1f}s "
                        f"identical {row['identical']}/{row['objects']}")
                    ctx.save()
            # e: what each cache holds for this project vs the raw object bytes.
            raw = sum(os.path.getsize(p) for p in objects(builds["plain"]).values())
            sizes = {"raw objects": raw}
            for c in cs:
                if c.name == "ccpool":
                    sizes["ccpool"] = du(c.dir)
                    results.append({"workload": "e", "rep": rep, "project": proj, "contender": "ccpool-stats",
                                    "stats": c.store_stats(), "logical_by_kind": c.logical_by_kind()})
                elif c.name in ("ccache", "sccache"):
                    sizes[c.name] = du(c.dir)
            for name, b in sizes.items():
                results.append({"workload": "e", "rep": rep, "project": proj, "contender": name, "bytes": b,
                                "objects": len(ref or {})})
            log(f"e {proj}: " + ", ".join(f"{k} {v / 2**20:.1f} MiB" for k, v in sizes.items()))
            for c in cs:
                c.stop()
            ctx.save()


LOOP = 'i=0; while [ $i -lt "$1" ]; do "${@:3}" || exit 1; i=$((i+1)); done'


def workload_d(ctx, contenders, results):
    base = fresh_dir(os.path.join(ctx.work, "d"))
    with open(os.path.join(base, "tiny.cpp"), "w") as f:
        f.write("int tiny(int x) { return x * 3 + 1; }\n")
    total = 256 if ctx.quick else 1024
    by = {c.name: c for c in contenders}
    for c in contenders:
        if c.name in ("ccpool", "ccache", "sccache"):
            c.reset()
    ccp = by.get("ccpool")
    if ccp:
        run([ctx.ccpool, "serve", "--socket", ccp.socket, "--dir", ccp.dir])
    for n in (1, 8, 64):
        for c in contenders:
            if c.name not in ("ccpool", "ccache", "sccache"):
                continue
            if c.name == "ccpool":
                env = {"CCPOOL_SOCKET": ccp.socket, "CCPOOL_NO_AUTOSTART": "1"}
                tool = [ctx.client, "/usr/bin/g++", "g++"]
            else:
                env, tool = c.env(), [c.name, "g++"]
            per = max(1, total // n)
            # warm the entry (and, for ccpool, the manifest) once
            run(tool + ["-O2", "-c", "tiny.cpp", "-o", "warm.o"], env=env, cwd=base)
            before = c.counters()
            full_env = {**os.environ, **env}
            t0 = time.monotonic()
            procs = [subprocess.Popen(["bash", "-c", LOOP, "loop", str(per), "x"] + tool +
                                      ["-O2", "-c", "tiny.cpp", "-o", f"{c.name}-{n}-{j}.o"],
                                      env=full_env, cwd=base) for j in range(n)]
            failed = sum(1 for p in procs if p.wait() != 0)
            wall = time.monotonic() - t0
            after = c.counters()
            row = {"workload": "d", "contender": c.name, "clients": n, "requests": per * n, "failed_clients": failed,
                   "wall_s": round(wall, 4), "hits_per_s": round(per * n / wall, 1),
                   "counters": {k: after[k] - before.get(k, 0) for k in after}}
            pid = c.server_pid()
            if pid:
                row["server_rss"], row["server_hwm"] = proc_rss(pid)
            results.append(row)
            log(f"d {c.name:8} clients {n:3}: {row['hits_per_s']:8.1f} hits/s "
                f"rss {row.get('server_rss', 0) / 2**20:.1f} MiB")
            ctx.save()
    for c in contenders:
        c.stop()
