# Interleaved A/B of two tessel binaries on models, on the CPU: each round runs old then new (order
# flipped on odd rounds) with `tessel run --device cpu --time 50 --report` (wall time, cache warm,
# the spec given), ROUNDS rounds (default 5). Prints per model the median over rounds of each side
# and old/new; appends raw rows to OUT_CSV.
# usage: ROUNDS=5 python3 ab_cpu.py OLD_TESSEL NEW_TESSEL HW_SPEC OUT_CSV DEADLINE_S MODEL.json...
import json, math, os, subprocess, sys, time
old, new, hw, out_csv, deadline = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
models = sys.argv[6:]
t0 = time.time()
rows = {m: ([], []) for m in models}
with open(out_csv, "a") as fh:
    for r in range(int(os.environ.get("ROUNDS", "5"))):
        for m in models:
            if time.time() - t0 > deadline: break
            pair = [(0, old, "/tmp/cache_old"), (1, new, "/tmp/cache_new")]
            if r % 2: pair.reverse()
            for side, b, cache in pair:
                rep = f"/tmp/ab_{side}.json"
                try:
                    p = subprocess.run([b, "run", m, "--device", "cpu", "--hw", hw, "--time", "50", "--report", rep], capture_output=True,
                                       text=True, timeout=60, env=dict(os.environ, TESSEL_CACHE_DIR=cache))
                    v = json.load(open(rep))["median_s"] if p.returncode == 0 else None
                except Exception:
                    v = None
                if v: rows[m][side].append(v)
                fh.write(f"{r},{os.path.basename(m)},{'old' if side == 0 else 'new'},{v}\n")
rs = []
for m, (o, n) in rows.items():
    if not o or not n: print(os.path.basename(m), "missing", len(o), len(n)); continue
    mo, mn = sorted(o)[len(o) // 2], sorted(n)[len(n) // 2]
    rs.append(mo / mn)
    print("%-58s old %8.2f us  new %8.2f us  old/new %.3f  (%d rounds)" % (os.path.basename(m), mo * 1e6, mn * 1e6, mo / mn, len(o)))
if rs: print("geomean old/new %.3f over %d" % (math.exp(sum(map(math.log, rs)) / len(rs)), len(rs)))
