import json, subprocess, sys, re, statistics, itertools
import os
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "../../../.."))
T = os.path.join(ROOT, "build/default/tessel")
HW = os.path.join(ROOT, "experiments/op_sweep/runs/cpu-2026-11-30-op-sweep/host-probe.json")
REGS = 32
insts = sys.argv[1:]
def run(m, s):
    r = subprocess.run([T, "run", m, "--device", "cpu", "--hw", HW, "--schedule", s, "--time", "40"], capture_output=True, text=True)
    x = re.search(r"median ([0-9.]+) ms", r.stdout + r.stderr)
    return float(x.group(1)) if x else None
for name in insts:
    m = f"/tmp/ci/{name}.json"  # python3 experiments/op_sweep/instances.py --catalog cpu --out /tmp/ci
    s = json.loads(subprocess.run([T, "schedule", m, "--hw", HW], capture_output=True, text=True).stdout)
    variants = {}
    for gi, g in enumerate(s["groups"]):
        p = g["kernel"]["params"]
        if g["kernel"]["family"] != "microkernel" or "mr0" not in p: continue
        mr, nr = p["mr0"], p["nr0"]
        cands = {(mr, nr)}
        for dm, dn in [(-1, 0), (1, 0), (0, -1), (0, 1), (2, -1), (-2, 1), (mr, -nr // 2)]:
            a, b = mr + dm, nr + dn
            if a >= 1 and b >= 1 and a * b + b + 1 <= REGS: cands.add((a, b))
        for c in sorted(cands):
            t = json.loads(json.dumps(s)); t["groups"][gi]["kernel"]["params"]["mr0"], t["groups"][gi]["kernel"]["params"]["nr0"] = c
            f = f"/tmp/{name}.g{gi}.m{c[0]}n{c[1]}.json"; json.dump(t, open(f, "w")); variants[(gi, c)] = f
        break  # the first micro-kernel group
    if not variants: print(name, "no microkernel group"); continue
    times = {k: [] for k in variants}
    for r in range(3):
        for k, f in variants.items():
            t = run(m, f)
            if t: times[k].append(t)
    base = [k for k in variants if (k[1][0], k[1][1]) == (mr, nr)][0]
    b = statistics.median(times[base])
    out = " ".join(f"{k[1][0]}x{k[1][1]}:{statistics.median(v)/b:.3f}" for k, v in sorted(times.items()) if v)
    print(f"{name} derived {mr}x{nr} {b:.3f} ms | {out}", flush=True)
