#!/usr/bin/env python3
"""Predicted / measured Tessel time per instance of the whole run, grouped by the kernel templates
the instance was emitted with: geomean, 10th and 90th percentiles. Prints fidelity_by_template.txt."""
import collections, json, math, os

here = os.path.dirname(os.path.abspath(__file__))
rows = []
for shard in ("shard0", "shard1of4", "shard3of4"):
    rows += json.load(open(os.path.join(here, shard, "sweep.json")))["instances"]
groups = collections.defaultdict(list)
for r in rows:
    if r.get("tessel_ms") and r.get("tessel_predicted_ms"):
        fams = sorted(set(r.get("families") or []))
        groups["+".join(fams) if len(fams) <= 2 else "mixed"].append(r["tessel_predicted_ms"] / r["tessel_ms"])
print("%-22s %4s %8s %8s %8s" % ("templates", "n", "geomean", "p10", "p90"))
for key, v in sorted(groups.items(), key=lambda kv: -len(kv[1])):
    v.sort()
    n = len(v)
    print("%-22s %4d %8.2f %8.2f %8.2f" % (key, n, math.exp(sum(map(math.log, v)) / n), v[n // 10], v[min(n - 1, n * 9 // 10)]))
