#!/usr/bin/env python3
"""The trials a tuned schedule recorded (tessel schedule --tune K): each variant of each group, its
family and parameters, predicted and measured time; per group the Spearman rank correlation of
predicted and measured over all its variants and over each family's, and the derived plan's
(the schedule's first trial is not it: pass --default to name its parameters) place.

    python3 experiments/gemv/forms.py S.schedule.json [S2.schedule.json ...] > forms.txt
Python 3 standard library only.
"""
import json
import sys


def ranks(v):
    order = sorted(range(len(v)), key=lambda i: v[i])
    r = [0.0] * len(v)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2.0
        i = j + 1
    return r


def spearman(a, b):
    if len(a) < 3:
        return float("nan")
    ra, rb = ranks(a), ranks(b)
    n = len(a)
    ma, mb = sum(ra) / n, sum(rb) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra) ** 0.5
    vb = sum((y - mb) ** 2 for y in rb) ** 0.5
    return cov / (va * vb) if va > 0 and vb > 0 else float("nan")


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
