#!/usr/bin/env python3
"""The row and pool classes as the committed code runs them, from this folder's two runs.

Call 1 ran the streamed rows without the one-warp rule for short rows; call 2 added it for every
row (a bug let 1280- and 1600-wide layer norms fall to the streamed form). The committed rule
applies it to scalar-access rows only, so each instance's final plan is call 1's (rows of 16-byte
vectors that call 2 moved to one warp or streamed: final_plan_source.json, derived from `tessel
explain` of every instance on the committed build), or call 2's (everything else), or -- for
ResNet-50's mean over a width of 7, which the committed code leaves on the generic kernel after
call 2 measured the row kernel slower -- 2026-11-27's ("old": the generic kernel then). Writes
final.csv and prints the class summaries, and the same ids against 2026-11-27 (shard 0/3, the
code before this session, same machine kind).
"""
import csv, json, math, os, re

here = os.path.dirname(os.path.abspath(__file__))
c1 = {}
for line in open(os.path.join(here, "call1_rows/sweep_stage.log")):
    m = re.match(r"\[\d+/\d+\] (\S+)\s+tessel ([\d.]+) compile ([\d.]+) best ([\d.]+)", line)
    if m:
        c1[m.group(1)] = {"tessel_ms": float(m.group(2)), "compile_ms": float(m.group(3)), "best_baseline_ms": float(m.group(4))}
c2 = {r["id"]: r for r in csv.DictReader(open(os.path.join(here, "call2_rows/sweep.csv")))}
src = json.load(open(os.path.join(here, "final_plan_source.json")))
old = {r["id"]: r for r in csv.DictReader(open(os.path.join(here, "../h100-2026-11-27/op_sweep/sweep.csv")))}
rows = []
for i, r in c2.items():
    use = src.get(i, "c2")
    base = old[i] if use == "old" else r
    t = c1[i] if use == "c1" else {k: float(base[k]) for k in ("tessel_ms", "compile_ms", "best_baseline_ms")}
    rows.append({"id": i, "class": r["class"], "dtype": r["dtype"], "source": use, **t,
                 "vs_best": t["best_baseline_ms"] / t["tessel_ms"], "vs_compile": t["compile_ms"] / t["tessel_ms"]})
with open(os.path.join(here, "final.csv"), "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
    w.writeheader()
    w.writerows(rows)


def gm(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


for cls in ("row", "pool", None):
    sel = [r for r in rows if cls is None or r["class"] == cls]
    near = sum(r["vs_best"] >= 1 / 1.1 for r in sel)
    same = [r for r in sel if r["id"] in old and old[r["id"]]["tessel_ms"]]
    before = gm([float(old[r["id"]]["best_baseline_ms"]) / float(old[r["id"]]["tessel_ms"]) for r in same])
    print(f"{cls or 'all':5s} n={len(sel):3d} vs best {gm([r['vs_best'] for r in sel]):.3f} vs torch.compile "
          f"{gm([r['vs_compile'] for r in sel]):.3f} within 10% of best {near}/{len(sel)}; "
          f"the {len(same)} ids of 2026-11-27 shard 0: {before:.3f} -> {gm([r['vs_best'] for r in same]):.3f}")
print("worst 12 (vs best):")
for r in sorted(rows, key=lambda r: r["vs_best"])[:12]:
    print(f"  {r['id']:48s} {r['tessel_ms']:.4f} ms, best {r['best_baseline_ms']:.4f}: {r['vs_best']:.2f} ({r['source']})")
