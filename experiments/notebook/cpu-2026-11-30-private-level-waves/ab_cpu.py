# Interleaved A/B of two tessel binaries on CPU models: each round runs old then new (order flipped
# on odd rounds), `tessel run --device cpu --time N --report`; the new side checks against the
# interpreter in round 0. Prints per model the median over rounds of each side and old/new.
import json, math, os, subprocess, sys
old, new, hw, out_csv, rounds = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
models = sys.argv[6:]
rows = {m: ([], []) for m in models}
bad = []
with open(out_csv, "a") as fh:
    for r in range(rounds):
        for m in models:
            pair = [(0, old), (1, new)]
            if r % 2: pair.reverse()
            for side, b in pair:
                rep = f"/tmp/abcpu_{side}.json"
                args = [b, "run", m, "--device", "cpu", "--hw", hw, "--time", "10", "--report", rep]
                if r == 0 and side == 1: args.append("--check")
                p = subprocess.run(args, capture_output=True, text=True, timeout=600)
                v = json.load(open(rep))["median_s"] if p.returncode == 0 else None
                if p.returncode != 0: bad.append((m, side, p.returncode, p.stdout[-300:]))
                if v: rows[m][side].append(v)
                fh.write(f"{r},{os.path.basename(m)},{'old' if side == 0 else 'new'},{v}\n")
                fh.flush()
rs = []
for m, (o, n) in rows.items():
    if not o or not n: print(os.path.basename(m), "missing", len(o), len(n)); continue
    mo, mn = sorted(o)[len(o) // 2], sorted(n)[len(n) // 2]
    rs.append(mo / mn)
    print("%-50s old %9.3f ms  new %9.3f ms  old/new %.3f  (%d rounds)" % (os.path.basename(m), mo * 1e3, mn * 1e3, mo / mn, len(o)))
if rs: print("geomean old/new %.3f over %d" % (math.exp(sum(map(math.log, rs)) / len(rs)), len(rs)))
for b in bad: print("FAILED", b)
