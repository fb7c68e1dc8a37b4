#!/usr/bin/env python3
"""Interleaved A/B timing of two tessel binaries on the same models.

This VM's timings drift by up to 1.5x over minutes, so comparing two builds by running one suite
and then the other measures the drift as much as the change. This script alternates: in every
round, for every model, it runs `tessel run MODEL --device cpu --hw SPEC --time N --threads T
--check` with A and then with B (the order flips every round), and records each median. The ratio
of a pair is taken within the round; the summary is the geometric mean of the pairs' B/A ratios
and their range. A run whose check fails, or that prints no median, stops the script.

    experiments/cpu_suite/ab.py --a OLD/tessel --b NEW/tessel --hw SPEC.json \
        --model softmax=/tmp/cpuwork/models/softmax.json --model gemm=... --rounds 8 --out ab.csv

Progress goes to stderr when it is a terminal (--quiet silences it); the summary to stdout.
"""
import argparse
import csv
import math
import re
import subprocess
import sys


def run_once(binary, model, hw, time_runs, threads):
    cmd = [binary, "run", model, "--device", "cpu", "--hw", hw, "--time", str(time_runs), "--threads", str(threads), "--check"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    m = re.search(r"median ([0-9.]+) ms", p.stdout + p.stderr)
    if p.returncode != 0 or not m:
        sys.exit(f"ab.py: {' '.join(cmd)} failed (exit {p.returncode}):\n{p.stdout}{p.stderr}")
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", required=True, help="the baseline tessel binary")
    ap.add_argument("--b", required=True, help="the changed tessel binary")
    ap.add_argument("--hw", required=True, help="hardware spec JSON for both")
    ap.add_argument("--model", action="append", required=True, metavar="NAME=PATH")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--time", type=int, default=20, help="timed runs per tessel run (its median is recorded)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", help="CSV of every run: round,model,binary,median_ms")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()
    models = [m.split("=", 1) for m in args.model]
    if any(len(m) != 2 for m in models):
        sys.exit("ab.py: --model takes NAME=PATH")
    progress = sys.stderr.isatty() and not args.quiet
    rows, ratios = [], {name: [] for name, _ in models}
    total = args.rounds * len(models)
    done = 0
    for r in range(1, args.rounds + 1):
        for name, path in models:
            order = [("a", args.a), ("b", args.b)] if r % 2 else [("b", args.b), ("a", args.a)]
            t = {}
            for label, binary in order:
                t[label] = run_once(binary, path, args.hw, args.time, args.threads)
                rows.append((r, name, label, t[label]))
            ratios[name].append(t["b"] / t["a"])
            done += 1
            if progress:
                print(f"\r[{done}/{total}] round {r} {name}: a {t['a']:.3f} b {t['b']:.3f} ms", end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)
    if args.out:
        with open(args.out, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["round", "model", "binary", "median_ms"])
            w.writerows(rows)
    print(f"# B/A time ratio per model over {args.rounds} interleaved rounds (below 1: B faster)")
    print(f"{'model':16} {'geomean':>8} {'min':>6} {'max':>6}  {'a median ms':>11} {'b median ms':>11}")
    for name, _ in models:
        rs = ratios[name]
        gm = math.exp(sum(math.log(x) for x in rs) / len(rs))
        med = lambda label: sorted(t for (_, n, l, t) in rows if n == name and l == label)[len(rs) // 2]
        print(f"{name:16} {gm:8.3f} {min(rs):6.3f} {max(rs):6.3f}  {med('a'):11.3f} {med('b'):11.3f}")


if __name__ == "__main__":
    main()
