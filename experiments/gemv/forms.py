#!/usr/bin/env python3
"""The trials a tuned schedule recorded (tessel schedule --tune K): each variant of each group, its
family and parameters, predicted and measured time; per group the Spearman rank correlation of
predicted and measured over all its variants and over each family's, and the derived plan's
(the schedule's first trial is not it: pass --default to name its parameters) place.

    python3 experiments/gemv/forms.py S.schedule.json [S2.schedule.json ...] > forms.txt
Python 3 standard library only.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "op_sweep"))
from run_sweep import spearman as _spearman  # noqa: E402  (standard library only at import)


def spearman(a, b):
    r = _spearman(a, b)
    return float("nan") if r is None else r


def main():
    for path in sys.argv[1:]:
        d = json.load(open(path))
        for gi, g in enumerate(d["groups"]):
            trials = [t for t in g.get("trials", []) if t.get("measured_s")]
            if not trials:
                continue
            kernel = g["kernel"]
            chosen = " ".join(f"{k}={v}" for k, v in sorted(kernel.get("params", {}).items()))
            best = min(t["measured_s"] for t in trials)
            print(f"== {path.split('/')[-1]} group {gi}: {len(trials)} variants measured; recorded {kernel['family']} {chosen}")
            fams = sorted({t["family"] for t in trials})
            rho = spearman([t["predicted_s"] for t in trials], [t["measured_s"] for t in trials])
            print(f"   Spearman rho (predicted, measured) over all: {rho:.2f}; " +
                  "; ".join(f"{f}: {spearman([t['predicted_s'] for t in trials if t['family'] == f], [t['measured_s'] for t in trials if t['family'] == f]):.2f} ({sum(t['family'] == f for t in trials)})" for f in fams))
            top = min(trials, key=lambda t: t["predicted_s"])
            print(f"   the model's top-1: {top['family']} {top['params']}: {top['measured_s'] * 1e3:.4f} ms, {top['measured_s'] / best:.2f}x the best")
            for f in fams:
                ft = [t for t in trials if t["family"] == f]
                b = min(ft, key=lambda t: t["measured_s"])
                print(f"   best {f}: {b['measured_s'] * 1e3:.4f} ms ({b['measured_s'] / best:.2f}x the best) {b['params']}")
            for t in sorted(trials, key=lambda t: t["measured_s"]):
                print(f"     {t['family']:6s} measured {t['measured_s'] * 1e3:8.4f} ms predicted {t['predicted_s'] * 1e3:8.4f} ms  {t['params']}")


if __name__ == "__main__":
    main()
