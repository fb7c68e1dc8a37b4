#!/usr/bin/env python3
"""GPU time by kernel family before and after (ncu, one run of each model, same kind of machine:
H100), from the `families` stage summaries (scripts/device_run families, scripts/kernel_profile.py).
Writes families.csv and families.png next to this file.

    python3 compare.py      (needs matplotlib for the plot; the CSV without it)
"""
import csv
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
FAMILIES = ["wgmma", "mma", "flash", "row", "vector", "generic"]


def read(path):
    out, model = {}, None
    for line in open(path):
        m = re.match(r"== (\S+)", line)
        if m:
            model = m.group(1)
            out[model] = {}
            continue
        m = re.match(r"\s+(\w+)\s+(\d+) kernels\s+([\d.]+) us", line)
        if m and model:
            out[model][m.group(1)] = float(m.group(3))
    return out


def main():
    before = read(os.path.join(HERE, "before", "families_summary.txt"))
    after = read(os.path.join(HERE, "after", "families_summary.txt"))
    models = [m for m in before if m in after]
    rows = []
    for m in models:
        for side, data in (("before", before[m]), ("after", after[m])):
            rows.append({"model": m, "side": side, "total_us": round(sum(data.values()), 1),
                         **{f: round(data.get(f, 0.0), 1) for f in FAMILIES}})
    with open(os.path.join(HERE, "families.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["model", "side", "total_us"] + FAMILIES)
        w.writeheader()
        w.writerows(rows)
    for r in rows:
        print(f"{r['model']:20s} {r['side']:6s} {r['total_us']:8.1f} us  " +
              "  ".join(f"{fam} {r[fam]:.0f}" for fam in FAMILIES if r[fam]))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no matplotlib: no plot")
        return
    fig, ax = plt.subplots(figsize=(9, 4))
    colors = {"wgmma": "#1f77b4", "mma": "#6baed6", "flash": "#9467bd", "row": "#2ca02c", "vector": "#ff7f0e",
              "generic": "#d62728"}
    for i, r in enumerate(rows):
        x = i // 2 * 3 + i % 2
        bottom = 0
        for fam in FAMILIES:
            ax.bar(x, r[fam] / 1000, bottom=bottom, color=colors[fam], label=fam if i == 0 else None, width=0.9)
            bottom += r[fam] / 1000
        ax.text(x, bottom + 0.05, r["side"], ha="center", fontsize=7, rotation=90)
    ax.set_xticks([j * 3 + 0.5 for j in range(len(models))])
    ax.set_xticklabels(models, fontsize=8)
    ax.set_ylabel("GPU time per run (ms, ncu, summed kernels)")
    ax.set_title("H100: GPU time by kernel family, before and after the window kernels")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(HERE, "families.png"), dpi=120)


if __name__ == "__main__":
    main()
