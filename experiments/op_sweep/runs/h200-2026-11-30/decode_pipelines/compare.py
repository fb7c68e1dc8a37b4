#!/usr/bin/env python3
"""Before / after for the decode GEMMs: each instance's Tessel time in the full sweep (../full,
3a71731) against call 4's (the deepened pipelines), both against the best baseline of their own
run. Writes compare.csv here and prints the summary the README quotes."""
import csv, json, math, os

here = os.path.dirname(os.path.abspath(__file__))
before = {}
for shard in ("shard0", "shard1of4", "shard3of4"):
    for r in json.load(open(os.path.join(here, "..", "full", shard, "sweep.json")))["instances"]:
        before[r["id"]] = r
rows, wrong = [], 0
for r in json.load(open(os.path.join(here, "c4", "sweep.json")))["instances"]:
    b = before[r["id"]]
    wrong += not r.get("tessel_correct")
    if not (r.get("tessel_ms") and r.get("best_baseline_ms") and b.get("tessel_ms") and b.get("best_baseline_ms")):
        continue
    rows.append({"id": r["id"], "before_ms": b["tessel_ms"], "after_ms": r["tessel_ms"],
                 "before_best_ms": b["best_baseline_ms"], "after_best_ms": r["best_baseline_ms"],
                 "before_vs_best": b["best_baseline_ms"] / b["tessel_ms"], "after_vs_best": r["best_baseline_ms"] / r["tessel_ms"],
                 "speedup": b["tessel_ms"] / r["tessel_ms"], "families": " ".join(r.get("families") or [])})
with open(os.path.join(here, "compare.csv"), "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
gm = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs))
for key in ("before_vs_best", "after_vs_best"):
    xs = [r[key] for r in rows]
    print(f"{key}: geomean {gm(xs):.3f}, below 0.8x {sum(x < 0.8 for x in xs)}, within 10% or faster {sum(x >= 0.9 for x in xs)} of {len(xs)}")
print(f"Tessel after / before: {gm([r['speedup'] for r in rows]):.3f}x geomean; {wrong} instances incorrect")
