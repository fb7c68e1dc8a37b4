"""Before/after of the conv and pool instances this session re-ran (H100, GPU time both sides).

"before": each instance's latest row in the earlier H100 sweeps (2026-11-26* and 2026-11-27*);
"after": its latest row in this session's calls. Writes compare.csv and compare.svg beside this
file and prints the geomeans.  python3 experiments/notebook/h100-2026-11-28/compare.py
"""
import csv, glob, math, os

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)


def rows(paths):
    out = {}
    for f in sorted(paths):
        for r in csv.DictReader(open(f)):
            if r.get("speedup_vs_best"):
                out[r["id"]] = r
    return out


before = rows(glob.glob(os.path.join(root, "2026-11-2[67]*", "**", "sweep.csv"), recursive=True))
after = rows([os.path.join(here, c, "op-sweep", "sweep.csv") for c in ("call2_grouped_sweep", "call3_grouped_hwio", "call4_transpose")])


def geo(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


table = []
for i, a in sorted(after.items()):
    b = before.get(i)
    table.append({"id": i, "families_after": a["families"], "tessel_ms_after": float(a["tessel_ms"]),
                  "best_ms_after": float(a["best_baseline_ms"]), "vs_best_after": float(a["speedup_vs_best"]),
                  "families_before": b["families"] if b else "", "tessel_ms_before": float(b["tessel_ms"]) if b else "",
                  "vs_best_before": float(b["speedup_vs_best"]) if b else ""})
with open(os.path.join(here, "compare.csv"), "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(table[0]))
    w.writeheader()
    w.writerows(table)
groups = {"grouped (resnext50)": lambda i: "resnext50" in i, "depthwise": lambda i: ".dw" in i,
          "other NCHW convolutions": lambda i: i.startswith("conv.") and "resnext50" not in i and ".dw" not in i,
          "pooling": lambda i: i.startswith("pool.")}
for name, pick in groups.items():
    sel = [t for t in table if pick(t["id"])]
    both = [t for t in sel if t["vs_best_before"] != ""]
    print("%-24s %2d instances: after %.3fx the best baseline (min %.2fx, %d within 10%%); the %d measured before: %.3fx -> %.3fx"
          % (name, len(sel), geo([t["vs_best_after"] for t in sel]), min(t["vs_best_after"] for t in sel),
             sum(t["vs_best_after"] >= 0.9 for t in sel), len(both), geo([t["vs_best_before"] for t in both]),
             geo([t["vs_best_after"] for t in both])))
# compare.svg: after vs before per instance, log-log, by group (plain SVG: no plotting package).
both = [t for t in table if t["vs_best_before"] != ""]
colors = {"grouped (resnext50)": "#d62728", "depthwise": "#1f77b4", "other NCHW convolutions": "#2ca02c",
          "pooling": "#9467bd"}
lo, hi, size, pad = 0.02, 3.0, 420, 50


def px(v):
    return pad + (math.log(max(lo, min(hi, v))) - math.log(lo)) / (math.log(hi) - math.log(lo)) * size


parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">'
         % (size + 2 * pad + 170, size + 2 * pad),
         '<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="black"/>' % (pad, pad, size, size),
         '<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="gray" stroke-dasharray="4"/>'
         % (px(lo), size + 2 * pad - px(lo), px(hi), size + 2 * pad - px(hi))]
for v in (0.05, 0.1, 0.2, 0.5, 1, 2):
    parts.append('<text x="%.1f" y="%d" text-anchor="middle">%g</text>' % (px(v), size + pad + 14, v))
    parts.append('<text x="%d" y="%.1f" text-anchor="end">%g</text>' % (pad - 4, size + 2 * pad - px(v) + 4, v))
parts.append('<text x="%d" y="%d" text-anchor="middle">before: speedup vs the best baseline</text>' % (pad + size // 2, size + pad + 32))
parts.append('<text x="14" y="%d" transform="rotate(-90 14 %d)" text-anchor="middle">after</text>' % (pad + size // 2, pad + size // 2))
parts.append('<text x="%d" y="30">H100 op sweep, 2026-11-28: grouped windows + tiled transposes</text>' % pad)
for k, (name, pick) in enumerate(groups.items()):
    for t in both:
        if pick(t["id"]):
            parts.append('<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s" fill-opacity="0.8"><title>%s</title></circle>'
                         % (px(t["vs_best_before"]), size + 2 * pad - px(t["vs_best_after"]), colors[name], t["id"]))
    parts.append('<circle cx="%d" cy="%d" r="4" fill="%s"/><text x="%d" y="%d">%s</text>'
                 % (size + pad + 20, pad + 10 + 18 * k, colors[name], size + pad + 30, pad + 14 + 18 * k, name))
parts.append("</svg>")
with open(os.path.join(here, "compare.svg"), "w") as f:
    f.write("\n".join(parts) + "\n")

# The whole conv class as last measured on the H100 (this session's rows over the earlier ones).
latest = dict(before)
latest.update(after)
conv = [float(r["speedup_vs_best"]) for i, r in latest.items() if i.startswith("conv.")]
print("conv class, latest H100 row of each of %d instances: %.3fx the best baseline, %d within 10%%, %d below 0.8x"
      % (len(conv), geo(conv), sum(x >= 0.9 for x in conv), sum(x < 0.8 for x in conv)))
