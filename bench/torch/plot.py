"""Draws bench/torch/results.json (from run.py) as real_torch.png: compile
phase and peak job RSS per rank count, without ccpool, with it (cold) and
on a fresh node with a warm store. Run with the venv's python (matplotlib)."""
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
    print(dst)


if __name__ == "__main__":
    main()
