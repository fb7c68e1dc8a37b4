#!/usr/bin/env python3
"""Plots the simt forms timed one by one (a run's forms.csv, written from `tessel schedule --tune`
trials): left, each form's predicted against its measured time per operator (log-log, the
diagonal is a perfect model); right, each form's measured time over its operator's best.

    python3 experiments/f32_simt/plot_forms.py runs/h200-2026-12-01/call4_forms/forms.csv OUT.png

Needs matplotlib.
"""
import collections
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    src, out = sys.argv[1], sys.argv[2]
    rows = list(csv.DictReader(open(src)))
    groups = collections.OrderedDict()
    for r in rows:
        groups.setdefault("%s/%s" % (r["operator"], r["group"]), []).append(r)
    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 6))
    for i, (name, forms) in enumerate(groups.items()):
        color = plt.cm.tab20(i % 20)
        left.scatter([float(f["predicted_ms"]) for f in forms], [float(f["measured_ms"]) for f in forms], s=12, color=color, label=name)
        right.scatter([i] * len(forms), [float(f["vs_best"]) for f in forms], s=12, color=color)
    lo = min(min(float(r["predicted_ms"]), float(r["measured_ms"])) for r in rows)
    hi = max(max(float(r["predicted_ms"]), float(r["measured_ms"])) for r in rows)
    left.plot([lo, hi], [lo, hi], color="grey", linewidth=0.8)
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel("predicted ms (cost model)")
    left.set_ylabel("measured ms (H200, CUDA-graph replays)")
    left.set_title("every simt form of each group: predicted vs measured")
    left.legend(fontsize=6, loc="upper left")
    right.set_yscale("log")
    right.set_xticks(range(len(groups)))
    right.set_xticklabels(list(groups), rotation=75, fontsize=7)
    right.set_ylabel("measured / the group's best form")
    right.set_title("spread of the forms (the top points: 1024-thread forms)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
