#!/usr/bin/env python3
"""conv_bn_relu (CPU suite) with hand-set task tiles, against welder's own: replays each schedule
with `tessel run --schedule --check` and prints the medians.

    experiments/cpu_suite/runs/cpu-2026-11-25d/conv_tiles.py build/default/tessel SPEC MODEL.json [ROUNDS]

MODEL.json is the suite's conv_bn_relu model (run_suite.py writes it as WORK/models/conv_bn_relu.json). Each variant keeps welder's groups and register tiles and sets the conv
group's task (l2) tile to C channels x R rows and its l1d tile to C1 x R1; the ReLU group follows
the rows.
"""
import copy, json, re, subprocess, sys, tempfile, os

tessel, spec, model = sys.argv[1:4]
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 1
work = tempfile.mkdtemp()
base = os.path.join(work, "welder.json")
subprocess.run([tessel, "schedule", model, "--hw", spec, "-o", base], check=True, stdout=subprocess.DEVNULL)
sched = json.load(open(base))
variants = {"welder": base}
for c, r, c1, r1 in [(4, 8, 4, 8), (16, 4, 16, 4), (32, 1, 16, 1), (64, 1, 16, 1), (64, 2, 16, 2)]:
    s = copy.deepcopy(sched)
    for gi, g in enumerate(s["groups"]):
        conv = "conv" in g["nodes"]
        for t in g["tiles"].values():
            for lv in t["levels"]:
                sp = lv["spatial"]
                if lv["level"] == "l2":
                    sp[1], sp[2] = (c if conv else sp[1]), r
                elif lv["level"] == "l1d":
                    sp[1], sp[2] = (c1 if conv else sp[1]), r1
                elif lv["level"] == "registers":
                    sp[2] = 1
                    if conv:
                        sp[1] = min(sp[1], c1)
    path = os.path.join(work, "%dx%d.json" % (c, r))
    json.dump(s, open(path, "w"))
    variants["%d ch x %d rows (l1d %d x %d)" % (c, r, c1, r1)] = path
for k in range(rounds):
    for name, path in variants.items():
        out = subprocess.run([tessel, "run", model, "--device", "cpu", "--hw", spec, "--schedule", path, "--time", "20",
                              "--threads", "2", "--check"], capture_output=True, text=True)
        text = out.stdout + out.stderr
        ok = "matches the interpreter" in text
        m = re.search(r"median ([0-9.]+) ms", text)
        print("round %d  %-28s %s  %s" % (k + 1, name, m.group(1) + " ms" if m else "-", "checked" if ok else "CHECK FAILED: " + text[-300:]),
              flush=True)
