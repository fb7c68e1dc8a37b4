#!/usr/bin/env python3
"""Re-prices a finished fidelity run's measured tensor-core kernels with another build or spec,
offline (no GPU): each trial of `trials.csv` (family mma or wgmma, measured) is replayed as its
operator's schedule with the trial's kernel parameters (`tessel explain --schedule`), and the
new predictions are scored against the run's measurements -- measured / predicted per family,
Spearman rho per operator, and how often the cheapest predicted of an operator's measured
kernels is within 10% of its best. A model change can be judged on hundreds of measured kernels
before any device time is spent.

    python3 experiments/op_sweep/instances.py --catalog gpu --out /tmp/gi
    python3 experiments/cost_model_fidelity/reprice.py RUN --tessel build/default/tessel \\
        --hw hw_specs/nvidia-h200.json --instances /tmp/gi [--json OUT.json]

Trials whose recorded parameters the build no longer accepts are skipped (and counted).
"""
import argparse
import csv
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "op_sweep"))
from run_sweep import geomean, spearman  # noqa: E402  (the op sweep's: ties averaged, None below 3 points)




def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("--tessel", required=True)
    ap.add_argument("--hw", required=True)
    ap.add_argument("--instances", required=True, help="folder of the op sweep's instance models")
    ap.add_argument("--json", help="write every re-priced trial here")
    args = ap.parse_args()
    rows = [r for r in csv.DictReader(open(os.path.join(args.run, "trials.csv"))) if r["measured_s"] and r["family"] in ("mma", "wgmma")]
    res, skipped = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        sched = os.path.join(tmp, "s.json")
        for r in rows:
            s = json.load(open(os.path.join(args.run, "schedules", r["id"] + ".json")))
            g = int(r["group"])
            params = {k: int(v) for k, v in (kv.split("=") for kv in r["params"].split())}
            s["groups"][g]["kernel"] = {"family": r["family"], "params": params}
            json.dump(s, open(sched, "w"))
            p = subprocess.run([args.tessel, "explain", os.path.join(args.instances, r["id"] + ".json"), "--hw", args.hw, "--schedule", sched],
                               capture_output=True, text=True)
            found = dict((int(a), float(b)) for a, b in re.findall(r"^kernel (\d+):.*\n\s+predicted ([0-9.e+-]+) ms", p.stdout, re.M))
            if g not in found:
                skipped += 1
                continue
            res.append({"id": r["id"], "family": r["family"], "params": r["params"], "measured_s": float(r["measured_s"]), "predicted_s": found[g] * 1e-3})
    if args.json:
        json.dump(res, open(args.json, "w"), indent=1)
    print(f"{len(res)} trials re-priced with {args.tessel} for {args.hw} ({skipped} skipped: parameters the build no longer accepts)")
    fam, ops = defaultdict(list), defaultdict(list)
    for r in res:
        fam[r["family"]].append(r["measured_s"] / r["predicted_s"])
        ops[r["id"]].append(r)
    for k, v in sorted(fam.items()):
        g = geomean(v)
        sd = math.exp(math.sqrt(sum((math.log(x) - math.log(g)) ** 2 for x in v) / len(v)))
        print(f"  {k}: {len(v)} kernels, measured / predicted geomean {g:.3f} (geometric sd {sd:.2f}, {min(v):.2f}-{max(v):.2f})")
    rhos, regrets = [], []
    for rs in ops.values():
        if len(rs) < 3:
            continue
        rho = spearman([r["predicted_s"] for r in rs], [r["measured_s"] for r in rs])
        if rho is not None:
            rhos.append(rho)
        best = min(r["measured_s"] for r in rs)
        regrets.append(min(rs, key=lambda r: r["predicted_s"])["measured_s"] / best)
    if regrets:
        rhos.sort()
        print(f"  {len(regrets)} operators with 3 or more kernels: median rho {rhos[len(rhos) // 2]:.2f}; the cheapest predicted within 10% "
              f"of the best measured on {sum(x <= 1.1 for x in regrets)}; geomean regret {geomean(regrets):.3f}")


if __name__ == "__main__":
    main()
