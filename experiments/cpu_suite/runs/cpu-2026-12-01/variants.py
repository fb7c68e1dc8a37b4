#!/usr/bin/env python3
"""Hand-set variants of one group's task tile and micro-kernel blocking, timed interleaved.
variants.py TESSEL SPEC MODEL ROUNDS 'C,R,mr,nr' ... (C/R: l2 tile channels/rows; 0 keeps welder's)"""
import copy, json, re, subprocess, sys, tempfile, os
tessel, spec, model, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
work = tempfile.mkdtemp()
base = os.path.join(work, "welder.json")
subprocess.run([tessel, "schedule", model, "--hw", spec, "-o", base], check=True, stdout=subprocess.DEVNULL)
sched = json.load(open(base))
variants = {"welder": base}
for v in sys.argv[5:]:
    c, r, mr, nr = (int(x) for x in v.split(","))
    s = copy.deepcopy(sched)
    g = s["groups"][0]
    if mr: g["kernel"]["params"]["mr0"] = mr
    if nr: g["kernel"]["params"]["nr0"] = nr
    for t in g["tiles"].values():
        for lv in t["levels"]:
            sp = lv["spatial"]
            if lv["level"] in ("l2",):
                if c: sp[-3] = c
                if r: sp[-2] = r
            if lv["level"] == "l1d":
                if c: sp[-3] = min(sp[-3], c)
                if r: sp[-2] = min(sp[-2], r)
            if lv["level"] == "registers":
                if c: sp[-3] = min(sp[-3], c)
                if r: sp[-2] = min(sp[-2], r)
    path = os.path.join(work, v.replace(",", "_") + ".json")
    json.dump(s, open(path, "w"))
    variants[v] = path
res = {k: [] for k in variants}
for k in range(rounds):
    for name, path in variants.items():
        out = subprocess.run([tessel, "run", model, "--device", "cpu", "--hw", spec, "--schedule", path, "--time", "20",
                              "--threads", "2", "--check"], capture_output=True, text=True)
        text = out.stdout + out.stderr
        ok = "matches the interpreter" in text
        m = re.search(r"median ([0-9.]+) ms", text)
        res[name].append(float(m.group(1)) if m and ok else float("nan"))
        if not ok: print(name, text[-400:])
for name, ts in res.items():
    print("%-16s %s  min %.3f" % (name, " ".join("%.3f" % t for t in ts), min(ts)), flush=True)
