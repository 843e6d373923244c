"""Workload c: real third-party trees built cold then warm (clean + build) by
each contender, every object compared with the plain cold build's: ccpool's own
tree and googletest (/usr/src/googletest), CMake + Ninja; libzstd (a plain
Makefile with `-MT $@ -MMD -MP -MF` auto-dependencies) and xz-utils (autotools
+ libtool, depcomp's `-MD -MP -MF`), leveldb (CMake + Ninja) and fmt (CMake +
Ninja; `__has_include` in its headers), all four from Debian's source packages
(scripts/fetch-bench-sources.sh), library targets only. Workload e: the bytes each
cache holds after c, against the raw object bytes. Workload d: ccpool service
throughput: hits/s with 1, 8 and 64 concurrent clients (ccpool-client, what the
shim execs), the service's RSS; ccache and sccache hit loops alongside."""
import filecmp
import os
import re
import shutil
import subprocess
import time

from common import children_cpu, du, fresh_dir, log, proc_cpu, proc_rss, run, ROOT

# name: (style, source dir (None: under --sources), CMake args, targets by size)
PROJECTS = {
    "ccpool": ("cmake", ROOT, ["-DCCPOOL_BUILD_TESTS=OFF", "-DCCPOOL_BUILD_BENCH=OFF"],
               {"tiny": ["ccpool_base"], "quick": ["ccpool_base", "ccpool_ipc"],
                "full": ["ccpool"]}),
    "googletest": ("cmake", "/usr/src/googletest", [], {"tiny": ["gtest"], "quick": [], "full": []}),
    # lib/ only: the library is the tree's C and its one .S; `make -C lib clean` clears it.
    "zstd": ("make", None, [], {"tiny": ["libzstd.a"], "quick": ["libzstd.a"], "full": ["libzstd.a"]}),
    # Library targets only (no tests, benchmarks or install rules): leveldb's C++ (CMake + Ninja, its
    # check_include_file probes at configure time), and fmt, whose headers test `__has_include` (core.h's
    # FMT_HAS_INCLUDE; os.h asks for "winapifamily.h", which is absent here).
    "leveldb": ("cmake", None, ["-DLEVELDB_BUILD_TESTS=OFF", "-DLEVELDB_BUILD_BENCHMARKS=OFF", "-DLEVELDB_INSTALL=OFF"],
                {"tiny": ["leveldb"], "quick": ["leveldb"], "full": ["leveldb"]}),
    "fmt": ("cmake", None, ["-DFMT_TEST=OFF", "-DFMT_DOC=OFF", "-DFMT_INSTALL=OFF", "-DFMT_FUZZ=OFF"],
            {"tiny": ["fmt"], "quick": ["fmt"], "full": ["fmt"]}),
    # CFLAGS without autoconf's default -g: debug info names the build dir, and each contender builds in its own.
    "xz": ("autotools", None, ["--disable-shared", "--disable-nls", "--disable-doc", "CFLAGS=-O2"],
           {"tiny": ["-C", "src/liblzma"], "quick": [], "full": []}),
}


def objects(build):
    out = {}
    for d, _, files in os.walk(build):
        for f in files:
            if f.endswith(".o"):
                p = os.path.join(d, f)
                # zstd names its object dir after a hash of $(CC) and the flags (obj/conf_<md5>/), and CC
                # differs per contender ("ccache cc"): compare by the rest of the path.
                out[re.sub(r"/conf_[0-9a-f]+/", "/conf_*/", "/" + os.path.relpath(p, build))[1:]] = p
    return out


def compare(ref, build):
    mine = objects(build)
    same = [k for k in ref if k in mine and filecmp.cmp(ref[k], mine[k], shallow=False)]
    diff = sorted(k for k in ref if k in mine and k not in same)
    return {"objects": len(ref), "identical": len(same), "different": len(diff),
            "missing": len([k for k in ref if k not in mine]), "different_names": diff[:10]}


def cc_for(c):
    """The C compiler command a Makefile or configure gets for contender c."""
    return f"{c.launcher()} cc" if c.launcher() else "cc"


def build_cmd(ctx, style, c, build, targets):
    if style == "cmake":
        cmd = ["cmake", "--build", build, "-j", str(ctx.cores)]
        for t in targets:
            cmd += ["--target", t]
        return cmd
    if style == "make":
        return ["make", "-C", os.path.join(build, "lib"), "-j", str(ctx.cores), f"CC={cc_for(c)}"] + targets
    return ["make", "-C", build, "-j", str(ctx.cores)] + targets


def clean_cmd(style, build):
    if style == "cmake":
        return ["cmake", "--build", build, "--target", "clean"]
    return ["make", "-C", os.path.join(build, "lib") if style == "make" else build, "clean"]


def configure(ctx, style, src, args, c, build):
    """A fresh build dir for contender c (a copy of the tree for in-tree builds)."""
    if style == "cmake":
        launcher = c.launcher()
        extra = [f"-DCMAKE_CXX_COMPILER_LAUNCHER={launcher}",
                 f"-DCMAKE_C_COMPILER_LAUNCHER={launcher}"] if launcher else []
        run(["cmake", "-S", src, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"] + args + extra,
            env=c.env())
        return
    shutil.rmtree(build)
    shutil.copytree(src, build, symlinks=True)
    if style == "autotools":
        # configure's own test compiles are not measured (only the build is).
        run(["./configure", f"CC={cc_for(c)}"] + args, env=c.env(), cwd=build)


def ninja_log_size(build):
    try:
        return os.path.getsize(os.path.join(build, ".ninja_log"))
    except OSError:
        return None


def union_s(spans):
    total, end = 0, None
    for a, b in sorted(spans):
        if end is None or a > end:
            total, end = total + (b - a), b
        elif b > end:
            total, end = total + (b - end), b
    return total / 1000


def ninja_split(build, offset):
    """Where a CMake + Ninja build's time went, from the lines it appended to .ninja_log (start and end ms of
    every edge): the time some compile edge (an object) was running, and the time only other edges (archives,
    links, `cmake -E`) were. Every contender pays the second part alike; a cache can only shorten the first."""
    if offset is None:
        return None
    try:
        with open(os.path.join(build, ".ninja_log")) as f:
            f.seek(offset)
            lines = f.read().splitlines()
    except OSError:
        return None
    compile_spans, all_spans = [], []
    for line in lines:
        parts = line.split("\t")
        if len(parts) != 5 or not parts[0].isdigit():
            continue
        span = (int(parts[0]), int(parts[1]))
        all_spans.append(span)
        if parts[3].endswith((".o", ".obj")):
            compile_spans.append(span)
    if not all_spans:
        return None
    return {"compile_s": round(union_s(compile_spans), 4), "edges_s": round(union_s(all_spans), 4),
            "compile_edges": len(compile_spans), "edges": len(all_spans)}


def build_once(ctx, c, cmd, build=None):
    log_at = ninja_log_size(build) if build else None
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
    split = ninja_split(build, log_at) if build else None
    if split:
        row["ninja"] = split
    if r.returncode:
        row["error"] = r.stdout.decode(errors="replace")[-2000:]
        log(f"  FAILED: {row['error'][-600:]}")
    return row


def cold_pairs(ctx, cs, builds, style, targets, ref, results, tags):
    """The cold goal (5 %) is inside this machine's run-to-run spread, and its speed drifts over minutes: after
    the first cold round, ctx.cold_pairs more cold builds of plain and of ccpool (cleaned tree, empty store),
    one right after the other and in alternating order, so the report can take the median of paired ratios
    with the drift on neither side."""
    pair = [c for c in cs if c.name in ("plain", "ccpool")]
    if len(pair) != 2:
        return
    for i in range(ctx.cold_pairs):
        for c in (pair[::-1] if i % 2 == 0 else pair):  # ccpool first, then plain first, ...
            c.reset()
            run(clean_cmd(style, builds[c.name]))
            row = build_once(ctx, c, build_cmd(ctx, style, c, builds[c.name], targets), builds[c.name])
            row.update(compare(ref or {}, builds[c.name]))
            row.update({**tags, "contender": c.name, "pair": i + 1})
            results.append(row)
            log(f"c {tags['project']} cold pair {i + 1} {c.name:8} {row['wall_s']:7.2f}s cpu {row['cpu_s']:6.1f}s "
                f"identical {row['identical']}/{row['objects']}")
            ctx.save()


def workload_c(ctx, contenders, results):
    cs = [c for c in contenders if c.name != "capped"]  # a make -jN build has no per-rank pool to cap
    mode = "tiny" if ctx.tiny else "quick" if ctx.quick else "full"
    for rep in range(ctx.reps):
        for proj, (style, src, args, targets) in PROJECTS.items():
            if ctx.projects and proj not in ctx.projects:
                continue
            if src is None:
                src = os.path.join(ctx.sources, proj) if ctx.sources else ""
            if not os.path.isdir(src):
                why = f"{src or 'no --sources'} missing (scripts/fetch-bench-sources.sh fetches it)"
                log(f"c {proj}: SKIPPED: {why}")
                results.append({"workload": "c", "rep": rep, "project": proj, "skipped": why})
                continue
            version = ""
            if os.path.exists(os.path.join(src, ".ccpool-fetched")):
                with open(os.path.join(src, ".ccpool-fetched")) as f:
                    version = f.read().strip()
            builds = {}
            for c in cs:
                c.reset()
                build = fresh_dir(os.path.join(ctx.work, "c", proj, c.name))
                configure(ctx, style, src, args, c, build)
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
                        run(clean_cmd(style, build))
                    row = build_once(ctx, c, build_cmd(ctx, style, c, build, targets[mode]), build)
                    if c.name == "plain" and phase == "cold":
                        ref = objects(build)
                    row.update(compare(ref or {}, build))
                    row.update({"workload": "c", "rep": rep, "project": proj, "contender": c.name, "phase": phase,
                                "style": style, "version": version})
                    results.append(row)
                    log(f"c {proj} {phase} {c.name:8} {row['wall_s']:7.2f}s cpu {row['cpu_s']:6.1f}s "
                        f"identical {row['identical']}/{row['objects']}")
                    ctx.save()
            # The build system's own floor: the same build with every object up to date (plain's tree,
            # median of 3). A warm rebuild cannot be faster than this plus its compiler invocations.
            plain = next(c for c in cs if c.name == "plain")
            floor = sorted(build_once(ctx, plain, build_cmd(ctx, style, plain, builds["plain"], targets[mode]))
                           ["wall_s"] for _ in range(3))[1]
            results.append({"workload": "c", "rep": rep, "project": proj, "contender": "plain", "phase": "noop",
                            "style": style, "version": version, "wall_s": floor})
            log(f"c {proj} no-op build (floor) {floor:.2f}s")
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
            cold_pairs(ctx, cs, builds, style, targets[mode], ref, results,
                       {"workload": "c", "rep": rep, "project": proj, "phase": "cold", "style": style,
                        "version": version})
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
