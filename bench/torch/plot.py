"""Draws bench/torch/results.json (from run.py) as real_torch.png: compile
phase and peak job RSS per rank count, without ccpool, with it (cold) and
on a fresh node with a warm store, and prints the Markdown table that
BENCHMARKS.md carries. Run with the venv's python (matplotlib)."""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "results.json")
    dst = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "real_torch.png")
    with open(src) as f:
        res = json.load(f)
    rows = [(k, v) for k, v in res["runs"].items() if "plain" in v]
    labels = [k for k, _ in rows]
    series = [("plain", "torchrun"), ("ccpool", "ccpool run, cold"), ("fresh", "ccpool run, fresh node")]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    width = 0.25
    for i, (key, name) in enumerate(series):
        xs = [j + (i - 1) * width for j in range(len(rows))]
        axes[0].bar(xs, [v[key]["compile_s"] for _, v in rows], width, label=name)
        axes[1].bar(xs, [v[key]["peak_rss_mb"] / 1024 for _, v in rows], width, label=name)
    for ax, title in ((axes[0], "compile phase (s)"), (axes[1], "peak RSS of the job tree (GiB)")):
        ax.set_xticks(range(len(rows)))
        ax.set_xticklabels(labels)
        ax.set_title(title)
    axes[0].legend()
    fig.suptitle(f"torch 2.13.0 Inductor CPU, TORCHINDUCTOR_COMPILE_THREADS={res['threads']} per rank, "
                 f"{res['cpus']} CPUs, ccpool --jobs {res['jobs']}")
    fig.tight_layout()
    fig.savefig(dst, dpi=90)
    print_table(res)


def print_table(res):
    print("| R | run | compile phase | vs plain | compiler executions | hits / misses / pass-through / not stored "
          "| peak compiler jobs | peak job RSS | left 2 s / 7 s after SIGINT |")
    print("|---|---|---|---|---|---|---|---|---|")
    for key, runs in res["runs"].items():
        if "plain" not in runs:
            print(f"| {key[2:]} | — | would OOM (estimate {runs['would_oom_estimate_mb'] / 1024:.1f} GiB) "
                  "| | | | | | |")
            continue
        base = runs["plain"]["compile_s"]
        for name, label in (("plain", "torchrun"), ("ccpool", "ccpool run, cold"),
                            ("fresh", "ccpool run, fresh node"),
                            ("ccpool_fc", "ccpool run --frameworks-cache, cold"),
                            ("fresh_fc", "ccpool run --frameworks-cache, fresh node")):
            if name not in runs:
                continue
            r = runs[name]
            counts = "" if name == "plain" else \
                f"{r['hits']} / {r['misses']} / {r['passthrough']} / {r['not_stored']}"
            sig = runs.get(name + "_sigint") if name in ("plain", "ccpool") else None
            left = f"{sig['left_after_sigint_2s']} / {sig.get('left_after_sigint_7s', '?')}" if sig else ""
            print(f"| {key[2:]} | {label} | {r['compile_s']:.1f} s | {r['compile_s'] / base:.2f}× "
                  f"| {r['executions']} | {counts} | {r['peak_compilers']} | {r['peak_rss_mb'] / 1024:.2f} GiB "
                  f"| {left} |")


if __name__ == "__main__":
    main()
