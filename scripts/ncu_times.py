#!/usr/bin/env python3
"""Per-launch device times from `ncu --metrics gpu__time_duration.sum --csv` output (scripts/device_run profile).

usage: ncu_times.py CSV LABEL   prints one line per kernel launch and the total, in microseconds
"""
import csv
import sys

SCALE = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "second": 1e6, "s": 1e6}


def main():
    path, label = sys.argv[1], sys.argv[2]
    with open(path) as f:
        rows = list(csv.reader(line for line in f if line.startswith('"')))
    if not rows:
        print(f"  {label:14s} no kernel rows (see the .err file)")
        return
    head = rows[0]
    name, value, unit = head.index("Kernel Name"), head.index("Metric Value"), head.index("Metric Unit")
    total = 0.0
    for r in rows[1:]:
        t = float(r[value].replace(",", "")) * SCALE.get(r[unit], 1.0)
        total += t
        print(f"  {label:14s} {r[name][:40]:40s} {t:10.1f} us")
    print(f"  {label:14s} {'total':40s} {total:10.1f} us")


if __name__ == "__main__":
    main()
