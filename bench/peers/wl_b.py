"""Workload b: sequential hit latency of a tiny TU and a 2k-line TU with
hyperfine (-N: no shell in between), mean and p99 per contender, /bin/true as
the floor. ccpool is measured twice: `ccpool exec -- g++ ...` and the shim path
(hyperfine itself runs under `ccpool run`, so its exec of g++ is redirected the
way a rank's is). Rounds alternate the contenders (A B A B) and are merged."""
import json
import os

from common import fresh_dir, log, run

TINY = "int tiny(int x) { return x * 3 + 1; }\n"


def big_tu():
    lines = ["#include <vector>", "#include <string>", "#include <cstdint>", ""]
    i = 0
    while len(lines) < 2000:
        lines += [f"int64_t f{i}(const std::vector<int64_t>& v, int64_t s) {{",
                  f"  int64_t acc = {i};",
                  f"  for (auto x : v) acc = acc * 31 + (x ^ s) + {i % 97};",
                  "  return acc;", "}", ""]
        i += 1
    return "\n".join(lines) + "\n"


def hyperfine(cmd_line, runs, warmup, out_json, env, cwd, wrap=None):
    cmd = ["hyperfine", "-N", "--style", "none", "--warmup", str(warmup), "--runs", str(runs),
           "--export-json", out_json, cmd_line]
    run((wrap or (lambda c: c))(cmd), env=env, cwd=cwd)
    with open(out_json) as f:
        return json.load(f)["results"][0]["times"]


def workload_b(ctx, contenders, results):
    base = fresh_dir(os.path.join(ctx.work, "b"))
    with open(os.path.join(base, "tiny.cpp"), "w") as f:
        f.write(TINY)
    with open(os.path.join(base, "big.cpp"), "w") as f:
        f.write(big_tu())
    by = {c.name: c for c in contenders}
    rounds, runs = (2, 25) if ctx.quick else (4, 50)
    for name in ("ccache", "sccache", "ccpool"):
        if name in by:
            by[name].reset()
    ccp = by.get("ccpool")
    if ccp:
        run([ctx.ccpool, "serve", "--socket", ccp.socket, "--dir", ccp.dir])
    for tu in ("tiny", "big"):
        src = f"{tu}.cpp"
        cases = [("true", "/bin/true", {}, None, runs), ("plain", f"g++ -O2 -c {src} -o plain-{tu}.o", {}, None, 3)]
        if "ccache" in by:
            cases.append(("ccache", f"ccache g++ -O2 -c {src} -o ccache-{tu}.o", by["ccache"].env(), None, runs))
        if "sccache" in by:
            cases.append(("sccache", f"sccache g++ -O2 -c {src} -o sccache-{tu}.o", by["sccache"].env(), None, runs))
        if ccp:
            cases.append(("ccpool exec", f"{ctx.ccpool} exec --socket {ccp.socket} -- g++ -O2 -c {src} -o exec-{tu}.o",
                          {}, None, runs))
            cases.append(("ccpool shim", f"g++ -O2 -c {src} -o shim-{tu}.o", {}, ccp.wrap, runs))
        times = {name: [] for name, *_ in cases}
        svc0 = ccp.counters() if ccp else {}
        for rnd in range(rounds):
            for name, line, env, wrap, n in cases:
                if name == "plain" and rnd > 0:
                    continue  # a real compile is the reference, not a contender here
                out = os.path.join(base, f"hf-{tu}-{name.replace(' ', '_')}-{rnd}.json")
                times[name] += hyperfine(line, n, 0 if name == "plain" else 3, out, env, base, wrap)
        if ccp:
            # The service's own mean time per hit for this TU: status keeps a running mean, so
            # mean = (sum after - sum before) / (hits after - hits before).
            svc1 = ccp.counters()
            dh = svc1.get("hits", 0) - svc0.get("hits", 0)
            if dh > 0 and "hit_service_us" in svc1:
                total = svc1["hit_service_us"] * svc1["hits"] - svc0.get("hit_service_us", 0) * svc0.get("hits", 0)
                results.append({"workload": "b", "tu": tu, "contender": "ccpool service-side", "hits": dh,
                                "hit_service_us": round(total / dh, 1)})
                log(f"b {tu:4} ccpool service-side mean {total / dh / 1000:.3f} ms over {dh} hits")
        for name, ts in times.items():
            ts = sorted(ts)
            row = {"workload": "b", "tu": tu, "contender": name, "runs": len(ts),
                   "mean_ms": round(1000 * sum(ts) / len(ts), 4),
                   "p50_ms": round(1000 * ts[len(ts) // 2], 4),
                   "p99_ms": round(1000 * ts[min(len(ts) - 1, int(0.99 * len(ts)))], 4),
                   "min_ms": round(1000 * ts[0], 4)}
            results.append(row)
            log(f"b {tu:4} {name:12} mean {row['mean_ms']:8.2f} ms  p99 {row['p99_ms']:8.2f} ms")
    if ccp:
        results.append({"workload": "b", "contender": "ccpool", "tu": "status", "counters": ccp.counters()})
    for name in ("ccache", "sccache"):
        if name in by:
            results.append({"workload": "b", "contender": name, "tu": "status", "counters": by[name].counters()})
    ctx.save()
    for c in contenders:
        c.stop()
