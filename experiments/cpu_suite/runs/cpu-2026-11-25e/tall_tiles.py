#!/usr/bin/env python3
"""Welder's GEMM task tile against taller hand-set ones, in interleaved rounds.

For each model: `tessel schedule` with welder, then the same schedule with the contraction's
outer (l2) tile replaced by each variant, every variant timed once per round with
`tessel run --schedule --check`. Prints one line per (round, model, tile) and the median per tile.

    tall_tiles.py TESSEL SPEC.json NAME=MODEL.json ... [--rounds 3] > tall_tiles.txt
"""
import json
import re
import statistics
import subprocess
import sys
import tempfile

TILES = [None, (256, 128), (512, 128), (512, 64)]  # None: welder's own


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    rounds = 3
    if "--rounds" in sys.argv:
        rounds = int(sys.argv[sys.argv.index("--rounds") + 1])
        args.remove(str(rounds))
    tessel, spec, models = args[0], args[1], [m.split("=", 1) for m in args[2:]]
    work = tempfile.mkdtemp(prefix="tall_tiles_")
    schedules = {}
    for name, path in models:
        base = f"{work}/{name}.welder.json"
        subprocess.run([tessel, "schedule", path, "--hw", spec, "-o", base], check=True, capture_output=True)
        d = json.load(open(base))
        for tile in TILES:
            if tile is None:
                schedules[(name, "welder")] = base
                continue
            for g in d["groups"]:
                for node, cfg in g["tiles"].items():
                    if len(g["nodes"]) == 1 and cfg["levels"][0]["reduction"]:  # the contraction's own group
                        cfg["levels"][0]["spatial"] = list(tile)
            f = f"{work}/{name}.{tile[0]}x{tile[1]}.json"
            json.dump(d, open(f, "w"))
            schedules[(name, f"{tile[0]}x{tile[1]}")] = f
    times = {}
    for r in range(1, rounds + 1):
        for name, path in models:
            for (n, label), sched in schedules.items():
                if n != name:
                    continue
                p = subprocess.run([tessel, "run", path, "--device", "cpu", "--hw", spec, "--schedule", sched, "--time", "10",
                                    "--threads", "2", "--check"], capture_output=True, text=True)
                m = re.search(r"median ([0-9.]+) ms", p.stdout)
                if p.returncode != 0 or not m:
                    sys.exit(f"tall_tiles.py: {name} {label} failed:\n{p.stdout}{p.stderr}")
                times.setdefault((name, label), []).append(float(m.group(1)))
                print(f"round {r} {name} {label} {m.group(1)}", flush=True)
    print("# median over rounds, ms")
    for (name, label), ts in times.items():
        print(f"{name:10} {label:8} {statistics.median(ts):8.3f}")


if __name__ == "__main__":
    main()
