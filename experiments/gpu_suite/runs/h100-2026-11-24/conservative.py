#!/usr/bin/env python3
"""The suite's speedups against the fastest torch.compile time measured for each workload in any
run of this folder (runs/*.json) or of 2026-11-23b (../h100-2026-11-23b/suite.json): torch.compile's
own time moved by up to 2.7x between device calls on the same machine, so the ratio to one run's
figure flatters or punishes Tessel by chance. Tessel's times are the final table's (suite.json)."""
import glob
import json
import math
import os

here = os.path.dirname(os.path.abspath(__file__))


def rows(path):
    return {r["id"]: r for r in json.load(open(path))["workloads"]}


final = rows(os.path.join(here, "suite.json"))
others = [rows(p) for p in sorted(glob.glob(os.path.join(here, "runs", "*.json")))]
others.append(rows(os.path.join(here, "..", "2026-11-23b", "suite.json")))
# Measured but in none of those files: the first device call of this day timed the two conv
# workloads once more (its JSON did not come back; README.md quotes its table), and 2026-11-23b's
# part b timed bert_layer's torch.compile at 0.356 ms before part d replaced that row.
quoted = {"conv_bn_relu": [0.177], "resnet_block": [0.174], "bert_layer": [0.356]}
speedups = []
print("%-14s %9s %14s %9s" % ("workload", "tessel", "best compile", "speedup"))
for wid, r in final.items():
    seen = [o[wid]["compile_ms"] for o in others if wid in o and o[wid].get("compile_ms")] + quoted.get(wid, [])
    best = min(seen + [r["compile_ms"]])
    s = best / r["tessel_ms"]
    speedups.append(s)
    print("%-14s %9.3f %14.3f %9.2f" % (wid, r["tessel_ms"], best, s))
print("geomean over %d workloads: %.2f" % (len(speedups), math.exp(sum(map(math.log, speedups)) / len(speedups))))
