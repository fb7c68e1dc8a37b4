#!/usr/bin/env python3
"""Real models before and after the normalize stage: Tessel's GPU time per case, from the
2026-11-26 run (before), this directory's first runs (channels-last, no channel padding:
real_models/, real_models_vit/) and its last run (with the stem convolutions' channels padded:
real_models_padded/, "after"), with torch.compile's time of the last run. Writes comparison.csv
and comparison.png here.

  python3 compare.py     (matplotlib for the plot)
"""
import csv
import math
import os

HERE = os.path.dirname(os.path.abspath(__file__))
BEFORE = os.path.join(HERE, "..", "2026-11-26", "real_models", "real_models.csv")
MIDDLE = [os.path.join(HERE, d, "real_models.csv") for d in ("real_models", "real_models_vit")]
AFTER = [os.path.join(HERE, "real_models_padded", "real_models.csv")]

before = {r["id"]: r for r in csv.DictReader(open(BEFORE))}
middle = {r["id"]: r for path in MIDDLE for r in csv.DictReader(open(path))}
rows = []
for path in AFTER:
    for r in csv.DictReader(open(path)):
        b = before[r["id"]]
        rows.append({"id": r["id"], "tessel_before_ms": float(b["tessel_ms"]),
                     "tessel_unpadded_ms": float(middle[r["id"]]["tessel_ms"]), "tessel_after_ms": float(r["tessel_ms"]),
                     "compile_after_ms": float(r["compile_ms"]), "compile_before_ms": float(b["compile_ms"]),
                     "speedup": float(b["tessel_ms"]) / float(r["tessel_ms"]),
                     "compile_over_tessel_before": float(b["compile_over_tessel"]),
                     "compile_over_tessel_after": float(r["compile_over_tessel"]),
                     "kernels_before": b["kernels"], "kernels_after": r["kernels"], "correct": r["tessel_correct"]})
with open(os.path.join(HERE, "comparison.csv"), "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
geo = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs))
print("case                 before ms  unpadded  after ms  speedup  compile/T before  after")
for r in rows:
    print("%-20s %9.3f %9.3f %9.3f %8.2f %17.3f %6.3f" % (r["id"], r["tessel_before_ms"], r["tessel_unpadded_ms"],
                                                       r["tessel_after_ms"], r["speedup"], r["compile_over_tessel_before"],
                                                       r["compile_over_tessel_after"]))
print("geomean speedup %.2f; torch.compile / Tessel %.3f -> %.3f" % (
    geo([r["speedup"] for r in rows]), geo([r["compile_over_tessel_before"] for r in rows]),
    geo([r["compile_over_tessel_after"] for r in rows])))
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    raise SystemExit("no matplotlib: comparison.png not written")
fig, ax = plt.subplots(figsize=(10, 4.5))
x = range(len(rows))
ax.bar([i - 0.3 for i in x], [r["tessel_before_ms"] for r in rows], 0.2, label="Tessel before (2026-11-26)")
ax.bar([i - 0.1 for i in x], [r["tessel_unpadded_ms"] for r in rows], 0.2, label="Tessel, channels-last")
ax.bar([i + 0.1 for i in x], [r["tessel_after_ms"] for r in rows], 0.2, label="Tessel, channels-last + padded stem")
ax.bar([i + 0.3 for i in x], [r["compile_after_ms"] for r in rows], 0.2, label="torch.compile")
ax.set_yscale("log")
ax.set_ylabel("GPU time per inference, ms (log)")
ax.set_xticks(list(x))
ax.set_xticklabels([r["id"] for r in rows], rotation=40, ha="right", fontsize=8)
ax.set_title("Real models, fp16, NVIDIA H200: before and after BN folding + channels-last")
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(os.path.join(HERE, "comparison.png"), dpi=120)
