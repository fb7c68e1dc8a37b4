#!/usr/bin/env python3
"""Where a compiled model's GPU time goes, by kernel family and by kernel.

Joins the manifest `tessel compile MODEL --device cuda --emit cuda -o DIR` writes (kernel name ->
family, launch, nodes) with the per-launch device times of `ncu --metrics gpu__time_duration.sum
--csv` over one `tessel run` of the same model and spec (scripts/ncu_times.py reads the same CSV).
Each kernel's time is its mean over the launches ncu saw (a run may launch a kernel more than once:
warm-up, check); kernels of the runtime that are not in the manifest (poison fills) are left out.

usage: kernel_profile.py MANIFEST_JSON NCU_CSV [--top N]
"""
import argparse
import collections
import csv
import json

SCALE = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "second": 1e6, "s": 1e6}


def launches(path):
    with open(path) as f:
        rows = list(csv.reader(line for line in f if line.startswith('"')))
    if not rows:
        return {}
    head = rows[0]
    name, value, unit = head.index("Kernel Name"), head.index("Metric Value"), head.index("Metric Unit")
    out = collections.defaultdict(list)
    for r in rows[1:]:
        out[r[name].split("(")[0]].append(float(r[value].replace(",", "")) * SCALE.get(r[unit], 1.0))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("manifest")
    p.add_argument("csv")
    p.add_argument("--top", type=int, default=15)
    a = p.parse_args()
    kernels = json.load(open(a.manifest))["kernels"]
    times = launches(a.csv)
    rows = []
    for k in kernels:
        t = times.get(k["name"])
        if t:
            rows.append((sum(t) / len(t), k))
    total = sum(t for t, _ in rows)
    if not rows:
        print("no launch of a manifest kernel in the ncu output")
        return
    by_family = collections.defaultdict(lambda: [0, 0.0])
    for t, k in rows:
        by_family[k["template"]][0] += 1
        by_family[k["template"]][1] += t
    print(f"{len(rows)} kernels, {total:.1f} us (mean per launch, summed)")
    for fam, (n, t) in sorted(by_family.items(), key=lambda x: -x[1][1]):
        print(f"  {fam:10s} {n:4d} kernels {t:10.1f} us {100 * t / total:5.1f}%")
    print(f"top {a.top}:")
    for t, k in sorted(rows, key=lambda x: -x[0])[: a.top]:
        nodes = ", ".join(k["nodes"][:4]) + (f" (+{len(k['nodes']) - 4})" if len(k["nodes"]) > 4 else "")
        print(f"  {t:8.1f} us {k['template']:8s} grid {k['grid']:6d} block {k['block']:4d}  {nodes}")


if __name__ == "__main__":
    main()
