#!/usr/bin/env python3
"""Compares op-sweep runs of the decode GEMMs (and decoding attention) instance by instance.

    python3 experiments/gemv/compare.py NEW.csv BEFORE.csv [BEFORE.csv ...] [--also LABEL=RUN.csv ...] > compare.txt

NEW.csv is a run_sweep.py sweep.csv; the BEFORE files are earlier sweep.csv files (the last one
listing an instance wins), the baseline the ratios are measured against is each run's own best of
eager / torch.compile / vendor (best_baseline_ms). Prints one row per instance of NEW (Tessel ms,
the kernel families, the ratios best / Tessel now and before) and the geomeans, counts below 0.8x
and at 0.9x or better over the instances both runs timed. Python 3 standard library only.
"""
import csv
import math
import sys


def load(paths):
    rows = {}
    for p in paths:
        with open(p) as f:
            for r in csv.DictReader(f):
                if r.get("tessel_ms"):
                    rows[r["id"]] = r
    return rows


def main():
    args = sys.argv[1:]
    also = [a for a in args if "=" in a]
    files = [a for a in args if "=" not in a and a != "--also"]
    new, before = load(files[:1]), load(files[1:])
    extra = [(a.split("=", 1)[0], load([a.split("=", 1)[1]])) for a in also]
    head = f"{'instance':44s} {'families':14s} {'Tessel ms':>9s} " + "".join(f"{label:>10s}" for label, _ in extra)
    print(head + f" {'before ms':>9s} {'best ms':>8s} {'now/best':>8s} {'before/best':>11s}")
    now_r, old_r = [], []
    for i, r in sorted(new.items()):
        t, b = float(r["tessel_ms"]), float(r["best_baseline_ms"])
        o = before.get(i)
        ot = float(o["tessel_ms"]) if o else float("nan")
        ob = float(o["best_baseline_ms"]) if o else float("nan")
        cols = "".join(f"{float(x[i]['tessel_ms']) if i in x else float('nan'):10.4f}" for _, x in extra)
        print(f"{i:44s} {r['families']:14s} {t:9.4f} {cols} {ot:9.4f} {b:8.4f} {b / t:8.2f} {ob / ot if o else float('nan'):11.2f}")
        if o:
            now_r.append(b / t)
            old_r.append(ob / ot)
    gm = lambda x: math.exp(sum(map(math.log, x)) / len(x))
    n = len(now_r)
    print(f"\n{n} instances timed in both: geomean best/Tessel {gm(now_r):.3f} now, {gm(old_r):.3f} before; "
          f"below 0.8x: {sum(x < 0.8 for x in now_r)} now, {sum(x < 0.8 for x in old_r)} before; "
          f"0.9x or better: {sum(x >= 0.9 for x in now_r)} now, {sum(x >= 0.9 for x in old_r)} before")


if __name__ == "__main__":
    main()
