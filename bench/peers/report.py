#!/usr/bin/env python3
"""Turns bench/results/raw.json + meta.json into the tables and PNG plots that
BENCHMARKS.md embeds. Each table replaces the text between `<!-- bench:X -->`
and `<!-- /bench:X -->` in BENCHMARKS.md, so re-running the script replaces the
numbers and nothing else. Several repetitions of a row are reduced to the median.
   report.py RESULTS_DIR BENCHMARKS.md"""
import json
import os
import re
import statistics
import sys

ORDER = ["plain", "capped", "ccache", "sccache", "ccpool"]


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def paired_ratios(rows, proj, phase, num, den):
    """Per repetition (and cold pair, bench/peers/wl_cd.py), num's wall over den's in the same one (adjacent runs:
    a machine whose speed drifts between them moves both), for those that have both."""
    by_rep = {}
    for r in rows:
        if r.get("project") == proj and r.get("phase") == phase and r.get("contender") in (num, den) and "wall_s" in r:
            by_rep.setdefault((r.get("rep", 0), r.get("pair", 0)), {})[r["contender"]] = r["wall_s"]
    return [v[num] / v[den] for _, v in sorted(by_rep.items()) if num in v and den in v and v[den] > 0]


def cold_overhead_cell(rows, proj, as_ratio=False):
    """'+x.x%' (as_ratio: 'x.xx×') for one pair; with more, followed by
    ' (median of N pairs, each against the plain build next to it: ...)'."""
    ratios = paired_ratios(rows, proj, "cold", "ccpool", "plain")
    if not ratios:
        return None, None
    ov = med(ratios) - 1
    text = f"{1 + ov:.2f}×" if as_ratio else f"{ov * 100:+.1f}%"
    if len(ratios) > 1:
        text += (f" (median of {len(ratios)} pairs, each against the plain build next to it: "
                 + ", ".join(f"{(x - 1) * 100:+.0f}%" for x in ratios) + ")")
    return ov, text


def group(rows, keys):
    out = {}
    for r in rows:
        out.setdefault(tuple(r.get(k) for k in keys), []).append(r)
    return out


def fmt_s(x):
    return "—" if x is None else f"{x:.2f} s"


def fmt_x(x):
    return "—" if x is None else f"{x:.2f}×"


def gib(b):
    return "—" if b is None else f"{b / 2**30:.2f} GiB"


def mib(b):
    return "—" if b is None else f"{b / 2**20:.1f} MiB"


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def cache_note(r):
    c = r.get("counters", {})
    name = r["contender"]
    if name == "ccache":
        hits = c.get("direct_cache_hit", 0) + c.get("preprocessed_cache_hit", 0)
        return f"hits {hits}, misses {c.get('cache_miss', 0)}, called for link {c.get('called_for_link', 0)}"
    if name == "sccache":
        return (f"hits {c.get('cache_hits', 0)}, misses {c.get('cache_misses', 0)}, "
                f"not a compile (link) {c.get('requests_not_compile', 0)}")
    if name == "harness floor":
        return "`ccpool run` + R python ranks with no kernel to compile"
    if name == "ccpool":
        return (f"hits {c.get('hits', 0)}, joins {c.get('joins', 0)}, executions {c.get('executions', 0)}, "
                f"fallbacks {c.get('fallbacks', 0)}")
    return "no cache"


def section_a(rows, plots_dir, meta):
    skipped = [r for r in rows if r["workload"] == "a" and r.get("skipped")]
    rows = [r for r in rows if r["workload"] == "a" and not r.get("skipped")]
    out, plots = [], []
    for r in skipped:
        out.append(f"- not run: {r['variant']} K={r['K']} R={r['R']} {r['phase']} {r['contender']}: {r['reason']} "
                   "(more than 80% of MemAvailable)")
    for (variant, k), rs in sorted(group(rows, ["variant", "K"]).items(), key=lambda kv: (kv[0][0] != "so", kv[0][1])):
        uniq = med(r["wall_s"] for r in rs if r["contender"] == "unique")  # over the rounds, for the plot

        def uniq_at(rr):
            """The physical limit measured in R's own round (older results: one per variant and K)."""
            return med(r["wall_s"] for r in rs if r["contender"] == "unique" and r["R"] == rr) or uniq
        kind = "one-step `-shared -o k.so`" if variant == "so" else "`-c -o k.o`"
        out.append(f"\n**{kind}, K = {k} kernels.** Physical limit (the {k} unique kernels, "
                   f"{meta['cores']} at a time, plain g++, measured in every R's round): "
                   + ", ".join(f"R={rr}: **{fmt_s(uniq_at(rr))}**" for rr in sorted({r['R'] for r in rs if r['R']}))
                   + ".\n")
        body = []
        cells = group([r for r in rs if r["contender"] != "unique"], ["R", "phase", "contender"])
        for rr in sorted({key[0] for key in cells}):
            for phase in ("cold", "warm"):
                present = [c for c in ORDER + ["harness floor"] if (rr, phase, c) in cells]
                walls = {c: med(x["wall_s"] for x in cells[(rr, phase, c)]) for c in present}
                peers = [walls[c] for c in present if c not in ("ccpool", "harness floor")]
                best_peer = min(peers) if peers else None
                for c in present:
                    xs = cells[(rr, phase, c)]
                    w = walls[c]
                    ident = f"{sum(x['identical'] for x in xs) // len(xs)}/{rr * k}" if c != "harness floor" else "—"
                    body.append([
                        rr, phase, c, fmt_x(w / uniq_at(rr) if uniq_at(rr) else None),
                        fmt_x(w / best_peer if best_peer and c == "ccpool" else None) if c == "ccpool" else "",
                        fmt_s(w), int(med(x["compilers_seen"] for x in xs)), int(med(x["peak_concurrent"] for x in xs)),
                        gib(med(x["peak_rss_bytes"] for x in xs)), f"{med(x['cpu_s'] for x in xs):.1f} s",
                        ident, cache_note(xs[0]) + ("" if all(x["rc"] == 0 for x in xs) else " **FAILED**"),
                        xs[0].get("load1", "—")])
        out.append(table(["R", "run", "contender", "wall / limit", "ccpool / best peer", "wall",
                          "compiler processes", "peak concurrent", "peak compiler RSS", "CPU", "outputs = unique's",
                          "counters", "load after"], body))
        plots.append(plot_a(rs, variant, k, uniq, plots_dir))
    out.append("")
    for p in plots:
        if p:
            out.append(f"![workload a: {p}](bench/results/{p})")
    return "\n".join(out)


def plot_a(rs, variant, k, uniq, plots_dir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    colors = dict(zip(ORDER, ["tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:red"]))
    for c in ORDER:
        for phase, style in (("cold", "-o"), ("warm", "--x")):
            pts = group([r for r in rs if r["contender"] == c and r["phase"] == phase], ["R"])
            if not pts:
                continue
            xs = sorted(x[0] for x in pts)
            ax1.plot(xs, [med(r["wall_s"] for r in pts[(x,)]) for x in xs], style, color=colors[c],
                     label=f"{c} {phase}")
            ax2.plot(xs, [med(r["peak_rss_bytes"] for r in pts[(x,)]) / 2**30 for x in xs], style,
                     color=colors[c], label=f"{c} {phase}")
    if uniq:
        ax1.axhline(uniq, color="k", linestyle=":", label="physical limit (unique work / cores)")
    ax1.set_xlabel("ranks R")
    ax1.set_ylabel("wall (s)")
    ax1.set_title(f"{variant}, K={k}: wall")
    ax2.set_xlabel("ranks R")
    ax2.set_ylabel("peak summed compiler RSS (GiB)")
    ax2.set_title(f"{variant}, K={k}: peak RSS")
    ax1.legend(fontsize=7)
    ax1.grid(alpha=0.3)
    ax2.grid(alpha=0.3)
    fig.tight_layout()
    name = f"a-{variant}-k{k}.png"
    fig.savefig(os.path.join(plots_dir, name), dpi=90)
    plt.close(fig)
    return name


def plt_or_none():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        return None


def plot_b(rows, plots_dir):
    plt = plt_or_none()
    if not plt or not rows:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for ax, tu in zip(axes, ("tiny", "big")):
        rs = [r for r in rows if r["tu"] == tu and r["contender"] != "plain"]
        names = [r["contender"] for r in rs]
        ax.barh(names, [r["mean_ms"] for r in rs], label="mean")
        ax.scatter([r["p99_ms"] for r in rs], names, color="k", marker="|", s=200, label="p99")
        ax.set_xlabel("ms per warm hit (sequential)")
        ax.set_title(f"{tu} TU")
        ax.grid(alpha=0.3, axis="x")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(plots_dir, "b-latency.png"), dpi=90)
    plt.close(fig)
    return "b-latency.png"


def plot_d(rows, plots_dir):
    plt = plt_or_none()
    if not plt or not rows:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for c in ("ccpool", "ccache", "sccache"):
        rs = sorted((r for r in rows if r["contender"] == c), key=lambda r: r["clients"])
        if rs:
            ax.plot([r["clients"] for r in rs], [r["hits_per_s"] for r in rs], "-o", label=c)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrent clients")
    ax.set_ylabel("hits/s")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(plots_dir, "d-throughput.png"), dpi=90)
    plt.close(fig)
    return "d-throughput.png"


def section_b(rows, plots_dir):
    rows_all = rows
    rows = [r for r in rows if r["workload"] == "b" and r.get("tu") in ("tiny", "big") and "mean_ms" in r]
    out = []
    for tu in ("tiny", "big"):
        rs = {r["contender"]: r for r in rows if r["tu"] == tu}
        if not rs:
            continue
        floor = rs.get("true", {}).get("mean_ms")
        cc = rs.get("ccache", {}).get("mean_ms")
        body = []
        for name in ("true", "plain", "ccache", "sccache", "ccpool exec", "ccpool shim"):
            if name in rs:
                r = rs[name]
                body.append([f"`/bin/true` (floor)" if name == "true" else
                             "real compile (plain g++)" if name == "plain" else name,
                             fmt_x(r["mean_ms"] / cc) if cc else "—",
                             fmt_x(r["mean_ms"] / floor) if floor else "—",
                             f"{r['mean_ms']:.2f} ms", f"{r['p50_ms']:.2f} ms", f"{r['p99_ms']:.2f} ms", r["runs"]])
        label = "tiny TU (one function)" if tu == "tiny" else "2k-line TU (`<vector>`, `<string>`, 330 functions)"
        out.append(f"\n**{label}**, `-O2 -c`, warm cache, sequential:\n")
        out.append(table(["contender", "mean / ccache", "mean / floor", "mean", "p50", "p99", "runs"], body))
        svc = [r for r in rows_all if r["workload"] == "b" and r.get("tu") == tu
               and r["contender"] == "ccpool service-side"]
        if svc:
            out.append(f"\nccpool's service-side time per hit of this TU (status `hit_service_us`, over "
                       f"{svc[-1]['hits']} hits): **{svc[-1]['hit_service_us'] / 1000:.3f} ms**.")
    st = [r for r in rows_all if r["workload"] == "b" and r.get("tu") == "status" and r["contender"] == "ccpool"]
    per_tu = any(r["workload"] == "b" and r["contender"] == "ccpool service-side" for r in rows_all)
    if st and "hit_service_us" in st[-1].get("counters", {}) and not per_tu:
        c = st[-1]["counters"]
        out.append(f"\nccpool's service-side share of a hit (status `hit_service_us`, mean over its {c.get('hits', 0)} "
                   f"hits of both TUs): **{c['hit_service_us'] / 1000:.3f} ms**; the rest of the shim row is the "
                   "exec of `ccpool-client`, its connect and the reply's writes.")
    p = plot_b(rows, plots_dir)
    if p:
        out.append(f"\n![workload b: {p}](bench/results/{p})")
    return "\n".join(out)


WARM_HOW = {
    "cmake": "`cmake --build --target clean` then build again, same build dir",
    "make": "`make -C lib clean` then `make -C lib libzstd.a` again, same tree",
    "autotools": "`make clean` then `make` again, same configured tree",
}


def section_c(rows):
    skipped = [r for r in rows if r["workload"] == "c" and "skipped" in r]
    rows = [r for r in rows if r["workload"] == "c" and "skipped" not in r and r.get("phase") != "noop"]
    out = [f"\n**{r['project']}: not built** ({r['skipped']})\n" for r in skipped]
    for (proj,), rs in group(rows, ["project"]).items():
        cells = group(rs, ["phase", "contender"])
        plain_cold = med(r["wall_s"] for r in cells.get(("cold", "plain"), []))
        plain_warm = med(r["wall_s"] for r in cells.get(("warm", "plain"), [])) or plain_cold  # --quick: not re-run
        body = []
        for phase in ("cold", "warm"):
            present = [c for c in ORDER if (phase, c) in cells]
            walls = {c: med(r["wall_s"] for r in cells[(phase, c)]) for c in present}
            peers = [walls[c] for c in present if c not in ("ccpool", "plain")]
            for c in present:
                xs = cells[(phase, c)]
                ref = plain_cold if phase == "cold" else plain_warm
                ratio = walls[c] / ref if ref else None
                x = xs[0]
                body.append([phase, c, fmt_x(ratio), fmt_x(walls[c] / min(peers)) if c == "ccpool" and peers else "",
                             fmt_s(walls[c]), f"{med(r['cpu_s'] for r in xs):.1f} s",
                             f"{x['identical']}/{x['objects']}" + (f" (different: {', '.join(x['different_names'][:3])}{', ...' if x['different'] > 3 else ''})"
                                                                    if x["different"] else ""),
                             cache_note(x) + ("" if all(r["rc"] == 0 for r in xs) else " **FAILED**")])
        first = rs[0]
        version = f", Debian source package `{first['version']}`" if first.get("version") else ""
        out.append(f"\n**{proj}** ({cells.get(('cold', 'plain'), [{}])[0].get('objects', '?')} objects{version}; "
                   f"warm = {WARM_HOW[first.get('style', 'cmake')]}):\n")
        out.append(table(["build", "contender", "wall / plain", "ccpool / best cache", "wall", "CPU",
                          "objects identical to plain cold", "counters"], body))
    return "\n".join(out)


def reasons(counters):
    """'passthrough:<code>' / 'not_stored:<code>' deltas of a ccpool row, as 'code N' text."""
    out = []
    for kind in ("passthrough", "not_stored"):
        items = sorted((k.split(":", 1)[1], v) for k, v in counters.items() if k.startswith(kind + ":") and v)
        if items:
            out.append(f"{kind.replace('_', ' ')}: " + ", ".join(f"`{k}` {v}" for k, v in items))
    return "; ".join(out) or "none"


def section_c_goals(rows):
    """Issue 13's goals for workload c, per tree."""
    rows = [r for r in rows if r["workload"] == "c" and "skipped" not in r]
    body = []
    for (proj,), rs in group(rows, ["project"]).items():
        def w(phase, name):
            return med(r["wall_s"] for r in rs if r["phase"] == phase and r["contender"] == name)

        def first(phase, name):
            xs = [r for r in rs if r["phase"] == phase and r["contender"] == name]
            return xs[0] if xs else None

        if w("warm", "ccpool") and w("warm", "ccache"):
            x = w("warm", "ccpool") / w("warm", "ccache")
            floor = w("noop", "plain")
            above = ""
            if floor is not None:
                a, b = w("warm", "ccpool") - floor, w("warm", "ccache") - floor
                above = (f"; above the no-op build's {fmt_s(floor)}: {fmt_s(a)} vs {fmt_s(b)}"
                         + (f" ({a / b:.2f}×)" if b > 0 else ""))
            body.append([proj, "warm rebuild ≤ 0.8× ccache's", f"{x:.2f}× ({fmt_s(w('warm', 'ccpool'))} vs "
                         f"{fmt_s(w('warm', 'ccache'))}{above}){compile_note(rows, proj)}", "met" if x <= 0.8 else "missed"])
        ov, text = cold_overhead_cell(rs, proj, as_ratio=True)
        if ov is not None:
            body.append([proj, "cold ≤ 1.05× plain", text, "met" if ov <= 0.05 else "missed"])
        warm = first("warm", "ccpool")
        if warm:
            objs = warm["objects"]
            hits = warm["counters"].get("hits", 0)
            share = (objs - min(hits, objs)) / objs if objs else 0
            body.append([proj, "objects not served from the store on the warm rebuild ≤ 2%",
                         f"{objs - min(hits, objs)} of {objs} ({share * 100:.1f}%); the build's uncached commands: "
                         f"{reasons(warm['counters'])}", "met" if share <= 0.02 else "missed"])
        diff = [f"{r['phase']} {r['contender']}" for r in rs
                if "identical" in r and (r["identical"] != r["objects"] or r.get("missing"))]
        body.append([proj, "every object byte-identical to plain's cold build",
                     "all" if not diff else "differs: " + ", ".join(diff), "met" if not diff else "missed"])
    return "\n" + table(["tree", "goal", "measured", "verdict"], body)


def section_d(rows, plots_dir):
    rows = [r for r in rows if r["workload"] == "d"]
    if not rows:
        return ""
    body = []
    for n in sorted({r["clients"] for r in rows}):
        rs = {r["contender"]: r for r in rows if r["clients"] == n}
        best_peer = max((rs[c]["hits_per_s"] for c in rs if c != "ccpool"), default=None)
        for c in ("ccpool", "ccache", "sccache"):
            if c in rs:
                r = rs[c]
                body.append([n, c, fmt_x(r["hits_per_s"] / best_peer) if c == "ccpool" and best_peer else "",
                             f"{r['hits_per_s']:.0f}", r["requests"],
                             mib(r.get("server_rss")) if c != "ccache" else "— (no server)",
                             mib(r.get("server_hwm")) if c != "ccache" else "",
                             cache_note(r) + (f" **{r['failed_clients']} clients failed**" if r["failed_clients"] else "")])
    p = plot_d(rows, plots_dir)
    return "\n" + table(["clients", "contender", "ccpool / best peer", "hits/s", "requests", "server RSS after",
                         "server peak RSS", "counters"], body) + (f"\n\n![workload d: {p}](bench/results/{p})" if p else "")


def section_e(rows):
    rows_all = rows
    rows = [r for r in rows if r["workload"] == "e" and "bytes" in r]
    out = []
    for (proj,), rs in group(rows, ["project"]).items():
        sizes = {r["contender"]: r["bytes"] for r in rs}
        raw = sizes.get("raw objects")
        st = [r for r in rows_all if r["workload"] == "e" and r.get("project") == proj
              and r["contender"] == "ccpool-stats" and "stored_bytes" in r.get("stats", {})]
        if "ccpool" in sizes:
            sizes["ccpool (LMDB file)"] = sizes.pop("ccpool")
        if st:
            sizes["ccpool payload, compressed (stored_bytes)"] = st[-1]["stats"]["stored_bytes"]
            sizes["ccpool payload, uncompressed (logical_bytes)"] = st[-1]["stats"]["logical_bytes"]
            for kind, b in sorted(st[-1].get("logical_by_kind", {}).items()):
                sizes[f"  of which {kind}, uncompressed"] = b
        body = [[name, fmt_x(b / raw) if raw else "—",
                 fmt_x(b / sizes["ccache"]) if sizes.get("ccache") else "—", mib(b)]
                for name, b in sizes.items()]
        entries = f", ccpool holds {st[-1]['stats'].get('entries', '?')} entries" if st else ""
        out.append(f"\n**{proj}** ({rs[0].get('objects', '?')} objects{entries}), after the cold + warm builds of c:\n")
        out.append(table(["", "bytes / raw objects", "bytes / ccache", "bytes"], body))
    return "\n".join(out)


def section_machine(meta):
    return "\n".join([
        "",
        f"- run: {meta['date']}, ccpool commit `{meta['ccpool_commit']}`, "
        f"{'`--quick`' if meta['quick'] else 'full'} run, {meta['reps']} repetition(s)"
        + (f", workloads took {meta['duration_s'] / 60:.1f} min" if "duration_s" in meta else ""),
        f"- cores: {meta['cores']} ({meta['cpu']}), memory {meta['mem_bytes'] / 2**30:.1f} GiB, "
        f"kernel {meta['kernel']}, load average at start {', '.join(f'{x:.1f}' for x in meta['load_at_start'])}"
        + (f", at end {', '.join(f'{x:.1f}' for x in meta['load_at_end'])}" if "load_at_end" in meta else "")
        + " (other users' work on a shared machine; `load1` in raw.json gives it per run)",
        f"- {meta['gxx']}; {meta['ccache']}; {meta['sccache']}; {meta['hyperfine']}; {meta['cmake']}; "
        f"ninja {meta['ninja']}",
        f"- command: `{meta['command']}`",
    ] + ([f"- `/proc/loadavg` recorded by `scripts/bench.sh` (`when date 1-min 5-min 15-min runnable/threads last-pid`): "
          + "; ".join(f"`{line}`" for line in meta["loadavg"])] if meta.get("loadavg") else [])
      + ([f"- before each workload the driver waited for a quiet machine (at most 2 runnable threads for 5 s, "
          f"bounded by 180 s): "
          + "; ".join(f"{k}: {v['waited_s']:.0f} s, {'quiet' if v['quiet'] else 'still busy'}, load "
                      f"{v['load1_before']:.1f} → {v['load1_after']:.1f}" for k, v in meta["settle"].items())]
         if meta.get("settle") else []))


def section_targets(rows, meta):
    """Issue 6's acceptance table, and issue 16's hit-path goals, measured."""
    a = [r for r in rows if r["workload"] == "a" and r["variant"] == "so" and r["K"] == 16]
    def cell(rr, phase, c):
        xs = [r for r in a if r["R"] == rr and r["phase"] == phase and r["contender"] == c]
        return xs
    uniq = (med(r["wall_s"] for r in a if r["contender"] == "unique" and r["R"] == 8)
            or med(r["wall_s"] for r in a if r["contender"] == "unique"))
    body = []
    cold = cell(8, "cold", "ccpool")
    if cold and uniq:
        w = med(r["wall_s"] for r in cold)
        body.append(["cold 8 × 16 `.so`", "≤ 1.15× the unique-work time", f"{w / uniq:.2f}× ({fmt_s(w)} vs {fmt_s(uniq)})",
                     "met" if w / uniq <= 1.15 else f"missed by {(w / uniq / 1.15 - 1) * 100:.0f}%"])
        ex = int(med(r["counters"].get("executions", 0) for r in cold))
        body.append(["executions", "= unique kernels (16)", str(ex), "met" if ex == 16 else "missed"])
        # the sampler's peak and the service's own peak_running (a fresh service per cold run)
        pk = int(max(max(r["peak_concurrent"], r["counters"].get("peak_running", 0)) for r in cold))
        jobs = int(max(r["counters"].get("jobs", 0) for r in cold)) or meta["cores"]
        body.append(["peak concurrent", f"≤ jobs ({jobs})", str(pk), "met" if pk <= jobs else "missed"])
    warm = cell(8, "warm", "ccpool")
    if warm:
        w = med(r["wall_s"] for r in warm)
        fl = med(r["wall_s"] for r in cell(8, "warm", "harness floor"))
        extra = f" (harness floor {fmt_s(fl)}: ccpool's share {fmt_s(w - fl)})" if fl is not None else ""
        body.append(["warm 8 × 16", "≤ 0.15 s", fmt_s(w) + extra,
                     "met" if w <= 0.15 else f"missed by {fmt_s(w - 0.15)}"])
        if fl:
            body.append(["warm 8 × 16 against its floor (issue 16)", "≤ 1.5× the harness floor",
                         f"{w / fl:.2f}× ({fmt_s(w)} vs {fmt_s(fl)})", "met" if w / fl <= 1.5 else "missed"])
    b = {r["contender"]: r for r in rows if r["workload"] == "b" and r.get("tu") == "tiny"}
    for path in ("ccpool shim", "ccpool exec"):
        if path in b and "ccache" in b:
            m = b[path]["mean_ms"]
            ratio = m / b["ccache"]["mean_ms"]
            ok = m <= 1.0 and ratio <= 0.35
            body.append([f"sequential hit ({path})", "≤ 1.0 ms, ≤ 0.35× ccache", f"{m:.2f} ms, {ratio:.2f}× ccache",
                         "met" if ok else "missed"])
            body.append([f"sequential hit ({path}, issue 16)", "≤ 1.0 ms, ≤ 0.30× ccache",
                         f"{m:.2f} ms, {ratio:.2f}× ccache", "met" if m <= 1.0 and ratio <= 0.30 else "missed"])
    c = [r for r in rows if r["workload"] == "c" and "skipped" not in r]
    for proj in sorted({r["project"] for r in c}):
        def w(phase, name):
            return med(r["wall_s"] for r in c if r["project"] == proj and r["phase"] == phase and r["contender"] == name)
        if w("warm", "ccpool") and w("warm", "ccache"):
            x = w("warm", "ccpool") / w("warm", "ccache")
            body.append([f"real-project warm rebuild ({proj}, issue 27)", "≤ 0.8× ccache's", f"{x:.2f}× ccache "
                         f"({fmt_s(w('warm', 'ccpool'))} vs {fmt_s(w('warm', 'ccache'))})" + compile_note(c, proj),
                         "met" if x <= 0.8 else "missed"])
        ov, text = cold_overhead_cell(c, proj)
        if ov is not None:
            body.append([f"cold overhead ({proj})", "≤ 5%", text, "met" if ov <= 0.05 else "missed"])
        ours = [r for r in c if r["project"] == proj and r["contender"] == "ccpool" and "identical" in r]
        if ours:
            bad = [r["phase"] for r in ours if r["identical"] != r["objects"] or r.get("missing")]
            body.append([f"objects identical to plain's ({proj})", "every object, cold and warm",
                         f"{ours[-1]['identical']}/{ours[-1]['objects']}" + (f"; differs: {', '.join(bad)}" if bad else ""),
                         "met" if not bad else "missed"])
    for test, goal in (("GET", 0.9), ("SET", 0.5)):
        rr = meta.get("resp", {}).get(test)
        if rr:
            lo, hi = min(rr["rounds"]), max(rr["rounds"])
            verdict = "met" if rr["ratio"] >= goal else "missed"
            if lo < goal <= hi:
                verdict += " (rounds on both sides of the goal)"
            body.append([f"Redis front {test}, TCP (`bench/resp_vs_redis.sh`)", f"≥ {goal}× redis-server",
                         f"{rr['ratio']:.2f}× (median of {len(rr['rounds'])} rounds; per round "
                         f"{', '.join(f'{x:.2f}' for x in rr['rounds'])}; {rr['ccpool'] / 1000:.1f}k/s vs "
                         f"{rr['redis'] / 1000:.1f}k/s)", verdict])
    return "\n" + table(["measure", "target", "measured", "verdict"], body)


def not_run_note(ran):
    missing = [k for k in ("a", "b", "c", "d") if k not in ran]
    if not missing:
        return ""
    what = {"a": "a (cold and warm 8 × 16: the first five rows of earlier tables)", "b": "b (sequential hits)",
            "c": "c (real trees)", "d": "d (throughput)"}
    return ("\n\nNot measured in this run (`--only`): workload " + "; ".join(what[k] for k in missing)
            + ". Their sections below keep the numbers of the run that last measured them.")


def compile_note(c, proj):
    """For CMake + Ninja trees: the warm rebuild's compile edges alone (ninja's log), ccpool against ccache."""
    def one(name):
        xs = [r["ninja"] for r in c if r["project"] == proj and r["phase"] == "warm" and r["contender"] == name
              and r.get("ninja")]
        return (med(x["compile_s"] for x in xs), med(x["edges_s"] for x in xs)) if xs else (None, None)
    (cp, ep), (cc, ec) = one("ccpool"), one("ccache")
    if cp is None or cc is None:
        return ""
    return (f"; compile edges only (ninja's log): {fmt_s(cp)} vs {fmt_s(cc)}"
            + (f" ({cp / cc:.2f}×)" if cc > 0 else "") + f", of {fmt_s(ep)} vs {fmt_s(ec)} of edges")


def resp_rows(res_dir):
    """bench/resp_vs_redis.csv: per test (TCP, one deep), the median ccpool/redis-server rate ratio and each round's."""
    path = os.path.join(res_dir, "resp_vs_redis.csv")
    try:
        with open(path) as f:
            lines = [line.strip().split(",") for line in f if line.strip()]
    except OSError:
        return {}
    rate = {}
    for row in lines[1:]:
        if len(row) >= 5 and row[2] == "tcp":
            rate[(row[0], row[1], row[3])] = float(row[4])
    out = {}
    for test in ("GET", "SET"):
        rounds = sorted({k[0] for k in rate if k[2] == test})
        ratios = [rate[(r, "ccpool", test)] / rate[(r, "redis", test)] for r in rounds
                  if (r, "ccpool", test) in rate and (r, "redis", test) in rate]
        if ratios:
            out[test] = {"ratio": med(ratios), "rounds": ratios,
                         "ccpool": med(rate[(r, "ccpool", test)] for r in rounds if (r, "ccpool", test) in rate),
                         "redis": med(rate[(r, "redis", test)] for r in rounds if (r, "redis", test) in rate)}
    return out


def replace(doc, key, text):
    pat = re.compile(rf"(<!-- bench:{key} -->)(.*?)(<!-- /bench:{key} -->)", re.S)
    if not pat.search(doc):
        print(f"report: marker bench:{key} missing in BENCHMARKS.md", file=sys.stderr)
        return doc
    return pat.sub(lambda m: m.group(1) + "\n" + text.strip("\n") + "\n" + m.group(3), doc)


def main():
    res_dir, doc_path = sys.argv[1], sys.argv[2]
    with open(os.path.join(res_dir, "raw.json")) as f:
        rows = json.load(f)["rows"]
    with open(os.path.join(res_dir, "meta.json")) as f:
        meta = json.load(f)
    try:
        with open(os.path.join(res_dir, "loadavg.txt")) as f:
            meta["loadavg"] = [line.strip() for line in f if line.strip()]
    except OSError:
        pass
    meta["resp"] = resp_rows(res_dir)
    with open(doc_path) as f:
        doc = f.read()
    # A run with --only rewrites the sections of the workloads it ran; the others keep their earlier text
    # (each says which run it came from), and the targets table says which goals this run did not measure.
    ran = set(meta.get("workloads") or ["a", "b", "c", "d"])
    doc = replace(doc, "machine", section_machine(meta))
    doc = replace(doc, "targets", section_targets(rows, meta) + not_run_note(ran))
    for key, fn in (("a", lambda: section_a(rows, res_dir, meta)), ("b", lambda: section_b(rows, res_dir)),
                    ("c", lambda: section_c(rows)), ("c-goals", lambda: section_c_goals(rows)),
                    ("d", lambda: section_d(rows, res_dir)), ("e", lambda: section_e(rows))):
        if key[0] in ran or (key == "e" and "c" in ran):
            doc = replace(doc, key, fn())
    with open(doc_path + ".tmp", "w") as f:
        f.write(doc)
    os.replace(doc_path + ".tmp", doc_path)
    print(f"report: updated {doc_path} from {len(rows)} rows")


if __name__ == "__main__":
    main()
