"""Workload a: R ranks x K Inductor-like kernels, each rank with a 32-thread
pool (scripts/lib/rank.py), one-step .so and -c variants, cold then warm, every
contender interleaved. The physical limit is the K unique kernels compiled
`cores` at a time by plain g++ (xargs -P), measured in the same run."""
import filecmp
import os
import shutil
import time

from common import PY, ROOT, Sampler, children_cpu, fresh_dir, log, proc_cpu, run, settle

GEN = os.path.join(ROOT, "scripts", "lib", "gen_kernels.py")
LAUNCH = os.path.join(ROOT, "bench", "peers", "launch_ranks.py")
FLAGS = {"so": ["-O2", "-shared", "-fPIC", "-fopenmp"], "obj": ["-O2", "-fopenmp", "-c"]}
EXT = {"so": ".so", "obj": ".o"}


def measure(ctx, contender, cmd, env, marker, ranks=None):
    """One timed run: wall, CPU (our children + the contender's server), compiler
    processes seen by the sampler, and the contender's counter deltas."""
    pid = contender.server_pid()
    cpu0_server = proc_cpu(pid) if pid else 0.0
    before = contender.counters()
    sampler = Sampler(marker)
    sampler.start()
    cpu0, t0 = children_cpu(), time.monotonic()
    r = run(contender.wrap(cmd, ranks), env={**contender.env(), **env}, check=False)
    wall = time.monotonic() - t0
    cpu = children_cpu() - cpu0
    seen = sampler.result()
    pid = contender.server_pid()
    if pid:
        cpu += proc_cpu(pid) - cpu0_server
    after = contender.counters()
    delta = {k: after[k] - before.get(k, 0) for k in after if isinstance(after[k], (int, float))}
    row = {"wall_s": round(wall, 4), "cpu_s": round(cpu, 3), "rc": r.returncode, "counters": delta,
           "load1": round(os.getloadavg()[0], 1), **seen}
    if r.returncode != 0:
        row["error"] = r.stdout.decode(errors="replace")[-2000:]
        log(f"  FAILED rc={r.returncode}: {row['error'][-500:]}")
    return row


def unique_work(ctx, kdir, variant, out):
    fresh_dir(out)
    srcs = sorted(f for f in os.listdir(kdir) if f.endswith(".cpp"))
    script = ('ls "$1"/*.cpp | xargs -P "$2" -I{} sh -c \'g++ "$0" ' + " ".join(FLAGS[variant]) +
              ' -o "$1/$(basename "$0" .cpp)' + EXT[variant] + '"\' {} "$3"')
    sampler = Sampler(kdir)
    sampler.start()
    cpu0, t0 = children_cpu(), time.monotonic()
    run(["sh", "-c", script, "sh", kdir, str(ctx.cores), out])
    wall = time.monotonic() - t0
    return {"wall_s": round(wall, 4), "cpu_s": round(children_cpu() - cpu0, 3), "unique": len(srcs),
            **sampler.result()}


def mem_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def compare_outputs(ref_dir, out_root, ranks):
    same = diff = missing = 0
    for r in range(ranks):
        d = os.path.join(out_root, f"rank{r}")
        for f in os.listdir(ref_dir):
            p = os.path.join(d, f)
            if not os.path.exists(p):
                missing += 1
            elif filecmp.cmp(p, os.path.join(ref_dir, f), shallow=False):
                same += 1
            else:
                diff += 1
    return {"identical": same, "different": diff, "missing": missing}


def plan(ctx):
    if ctx.tiny:
        return [("so", 2, [1, 2]), ("obj", 2, [2])]
    if ctx.quick:
        return [("so", 16, [1, 4, 8]), ("obj", 16, [2])]
    return [("so", k, [1, 2, 4, 8, 16]) for k in (16, 64)] + [("obj", k, [1, 2, 4, 8, 16]) for k in (16, 64)]


def wants_warm(ctx, contender, variant, ranks, rs):
    if not contender.caches:
        return not ctx.quick  # no cache: a warm run is a re-run; only the full run pays for it
    uncacheable = contender.name in ("ccache", "sccache") and variant == "so"
    return not (ctx.quick and uncacheable and ranks != rs[0])


def workload_a(ctx, contenders, results):
    base = os.path.join(ctx.work, "a")
    for rep in range(ctx.reps):
        for variant, k, rs in plan(ctx):
            kdir = os.path.join(base, f"kernels-{k}")
            if not os.path.isdir(kdir):
                run([PY, GEN, kdir, str(k)])
            ref = os.path.join(base, f"unique-{variant}-{k}")
            u = unique_work(ctx, kdir, variant, ref)
            log(f"a {variant} K={k}: unique work {u['wall_s']:.2f}s")
            per_compiler = u["peak_rss_bytes"] / max(1, u["peak_concurrent"])
            for r in rs:
                # The physical limit again, in this round: on a shared machine the load drifts, so each
                # R's ratios use the unique work measured next to its runs.
                if r != rs[0]:
                    u = unique_work(ctx, kdir, variant, ref)
                    log(f"a {variant} K={k}: unique work {u['wall_s']:.2f}s (before R={r})")
                results.append({"workload": "a", "rep": rep, "variant": variant, "K": k, "R": r,
                                "contender": "unique", "phase": "cold", "load1": round(os.getloadavg()[0], 1), **u})
                for phase in ("cold", "warm"):
                    if phase == "warm":  # the cold rows' compilers gone: the warm rows time hits, not their tail
                        waited = settle(bound_s=60)
                        log(f"a {variant} K={k} R={r} warm: waited {waited['waited_s']} s for a quiet machine "
                            f"({'quiet' if waited['quiet'] else 'still busy'}, load {waited['load1_after']:.1f})")
                    for c in contenders:
                        if phase == "cold":
                            c.reset()
                        elif not wants_warm(ctx, c, variant, r, rs):
                            continue
                        need = r * min(k, c.threads(32)) * per_compiler
                        if c.name != "ccpool" and need > 0.8 * mem_available():
                            # Running it would OOM the machine: say so instead of measuring.
                            results.append({"workload": "a", "rep": rep, "variant": variant, "K": k, "R": r,
                                            "contender": c.name, "phase": phase, "skipped": True,
                                            "reason": f"needs ~{need / 2**30:.0f} GiB of compiler RSS at once"})
                            log(f"a {variant} K={k} R={r} {phase} {c.name}: skipped, needs {need / 2**30:.0f} GiB")
                            continue
                        out = os.path.join(base, "out", c.name)
                        shutil.rmtree(out, ignore_errors=True)
                        cmd = [PY, LAUNCH, str(r), kdir, out, str(c.threads(32)), variant]
                        row = measure(ctx, c, cmd, {"CXX": c.cxx()}, kdir, ranks=r)
                        row.update(compare_outputs(ref, out, r))
                        row.update({"workload": "a", "rep": rep, "variant": variant, "K": k, "R": r,
                                    "contender": c.name, "phase": phase})
                        results.append(row)
                        log(f"a {variant} K={k} R={r} {phase:4} {c.name:8} {row['wall_s']:7.2f}s "
                            f"cpu {row['cpu_s']:7.1f}s compilers {row['compilers_seen']:4} "
                            f"peak {row['peak_concurrent']:3} identical {row['identical']}/{r * k}")
                        ctx.save()
                        if c.name == "ccpool" and phase == "warm":
                            # The harness alone (ccpool run + R python ranks with no kernel) bounds
                            # from below what any warm run can take.
                            empty = os.path.join(base, "no-kernels")
                            os.makedirs(empty, exist_ok=True)
                            cmd = [PY, LAUNCH, str(r), empty, out + "-floor", "32", variant]
                            row = measure(ctx, c, cmd, {}, empty, ranks=r)
                            row.update({"workload": "a", "rep": rep, "variant": variant, "K": k, "R": r,
                                        "contender": "harness floor", "phase": "warm", "identical": 0})
                            results.append(row)
                            log(f"a {variant} K={k} R={r} warm harness floor (ccpool run + {r} ranks, no kernel) "
                                f"{row['wall_s']:.2f}s")
            for c in contenders:
                c.stop()
