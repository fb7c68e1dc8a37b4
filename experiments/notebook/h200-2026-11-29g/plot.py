#!/usr/bin/env python3
"""old/new per op-sweep instance the final rule moves (call1_forms/ab.txt, instances in
changed_final.txt) and per batch-1 GEMM (call2_batch1/ab_gemms.txt): a bar chart, plot.png."""
import collections, os, re
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
HERE = os.path.dirname(os.path.abspath(__file__))
final = open(os.path.join(HERE, "changed_final.txt")).read().split()
rows = collections.defaultdict(list)
for line in open(os.path.join(HERE, "call1_forms", "ab.txt")):
    p = line.split()
    if len(p) == 4:
        rows[p[1]].append(float(p[2]) / float(p[3]))
names, ratios = [], []
for k in final:
    if k.endswith(".bf16"):
        continue  # (their f16 twins ran the same kernels' shapes; both are in ab.txt)
    v = sorted(rows[k])
    names.append(k.rsplit(".", 1)[0]); ratios.append(v[len(v) // 2])
for line in open(os.path.join(HERE, "call2_batch1", "ab_gemms.txt")):
    m = re.match(r"g_(\d+)_(\d+)_(\d+)\.json .* old/new ([0-9.]+)", line)
    if m and m.group(1) == "128" and m.group(2) + m.group(3) in ("7682304", "7683072", "3072768"):
        names.append("batch-1 GEMM %sx%sx%s" % m.groups()[:3]); ratios.append(float(m.group(4)))
fig, ax = plt.subplots(figsize=(8, 0.32 * len(names) + 1.2))
ax.barh(range(len(names)), ratios, color=["#2a7" if r >= 1 else "#c33" for r in ratios])
ax.axvline(1.0, color="k", lw=0.8)
ax.set_yticks(range(len(names)), names, fontsize=7)
ax.invert_yaxis()
ax.set_xlabel("old / new GPU time (>1: the 64-row blocks are faster)")
ax.set_title("64-row wgmma blocks where the final rule takes them (H200, f16)", fontsize=9)
fig.tight_layout()
fig.savefig(os.path.join(HERE, "plot.png"), dpi=110)
print("wrote plot.png:", len(names), "bars")
