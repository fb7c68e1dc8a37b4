#!/usr/bin/env python3
"""The streamed attention kernel's price against measured times (cost_model/analytic_model.cpp,
kFlashIssuesPerScore, kFlashBlockCycles, kFlashChunkCycles).

  attention_fit.py --tessel build/default/tessel --hw hw_specs/nvidia-h200.json SWEEP_CSV...

For every attention instance the sweep CSVs timed (`tessel_ms`), the model is written by the op
sweep's generator, scheduled with `tessel schedule`, and

  1. evaluate: Tessel's predicted latency against the measured time (geomean and RMS of
     log(predicted / measured), the count within 25%, Spearman's rank correlation);
  2. fit (--fit): the three constants by a grid search on the kernel geometry the schedule
     records (block rows, chunk, threads, splits, fold, visited chunks), once on all instances
     and once per half of the source models, each half's constants scored on the other half.

The fit's model is the C++ one, simplified: compute = (tensor-core time + softmax issue slots) x
wave quantization; a chain of block cycles + chunk cycles per chunk of a block, per wave; the
larger of compute, device memory (every input and the output once, at full bandwidth) and chain,
plus the launch (the C++ price also has L2 traffic, side inputs and the active SMs' share of
bandwidth). The evaluation is the C++ price itself (the schedule's predicted latency). Writes
nothing; prints a table with -v.
"""
import argparse
import csv
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "op_sweep"))
import instances as catalog  # noqa: E402
from run_sweep import spearman  # noqa: E402


def load_spec(tessel, path):
    """The spec at `path` with its "extends" resolved, as Tessel reads it (`tessel hw show --json`)."""
    return json.loads(subprocess.run([tessel, "hw", "show", path, "--json"], check=True, capture_output=True, text=True).stdout)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tessel", required=True)
    p.add_argument("--hw", required=True)
    p.add_argument("--fit", action="store_true")
    p.add_argument("-v", action="store_true")
    p.add_argument("csv", nargs="+")
    args = p.parse_args()
    measured = {}
    for path in args.csv:
        for r in csv.DictReader(open(path)):
            if r["class"] == "attention" and r.get("tessel_ms"):
                measured[r["id"]] = float(r["tessel_ms"]) * 1e-3
    spec = load_spec(args.tessel, args.hw)
    units, clock = spec["compute"]["units"], spec["compute"]["clock_ghz"] * 1e9
    tc_peak = spec["compute"]["tensor_peak_tflops"]["f16"] * 1e12
    simt_issue = spec["compute"]["simt_peak_tflops"]["f32"] * 1e12 / 2
    dram_bw = [l for l in spec["memory_levels"] if l["name"] == "dram"][0]["bandwidth_gbps"] * 1e9
    launch = spec["compute"]["launch_overhead_us"] * 1e-6
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for inst in catalog.instances():
            if inst.id not in measured:
                continue
            model = os.path.join(tmp, "m.json")
            with open(model, "w") as f:
                f.write(catalog.gm.render(inst.build().document()) + "\n")
            sched = os.path.join(tmp, "s.json")
            subprocess.run([args.tessel, "schedule", model, "--hw", args.hw, "-o", sched], check=True, capture_output=True)
            with open(sched) as f:
                s = json.load(f)
            with open(model) as f:
                m = json.load(f)
            flash = [g for g in s["groups"] if g.get("kernel", {}).get("family") == "flash"]
            if not flash:  # the attention kept the unfused kernels: nothing of this price to fit
                print("  %s: no streamed attention group (skipped)" % inst.id)
                continue
            g = flash[0]
            k = g["kernel"]["params"]
            q, kk, v = (m["inputs"][i]["shape"] for i in range(3))
            batch, queries, d, keys, dv = math.prod(q[:-2]), q[-2], q[-1], kk[-2], v[-1]
            points = batch // k["fold"]
            tiles = math.ceil(queries * k["fold"] / k["rows"])
            scores = points * k["key_chunks"] * k["rows"] * k["chunk"]
            in_bytes = (math.prod(q) + math.prod(kk) + math.prod(v) + batch * queries * dv) * 2
            rows.append(dict(id=inst.id, measured=measured[inst.id], predicted=s["predicted_latency_s"],
                             tc=scores * 2 * (k["d_tile"] + k["dv_tile"]) / tc_peak, soft=scores / simt_issue,
                             blocks=points * tiles * k["splits"], per_sm=g["predicted"]["blocks_per_unit"],
                             chunks=k["key_chunks"] / (tiles * k["splits"]), dram=in_bytes / dram_bw))
    ratios = [r["predicted"] / r["measured"] for r in rows]
    logs = [math.log(x) for x in ratios]
    print("%d attention instances: predicted / measured geomean %.3f, RMS of log %.3f, within 25%%: %d, Spearman %.3f"
          % (len(rows), math.exp(sum(logs) / len(logs)), math.sqrt(sum(x * x for x in logs) / len(logs)),
             sum(1 for x in ratios if 0.8 <= x <= 1.25), spearman([r["measured"] for r in rows], [r["predicted"] for r in rows])))
    if args.v:
        for r, x in sorted(zip(rows, ratios), key=lambda t: t[1]):
            print("  %-50s measured %.4f ms  predicted %.4f ms  %.2f" % (r["id"], r["measured"] * 1e3, r["predicted"] * 1e3, x))
    if not args.fit:
        return

    def predict(r, a, b, c):
        slots = units * r["per_sm"]
        waves = math.ceil(r["blocks"] / slots)
        compute = (r["tc"] + a * r["soft"]) * waves * slots / r["blocks"]
        chain = waves * (b + c * r["chunks"]) / clock
        return launch + max(compute, r["dram"], chain)

    def fit(sel):
        best = None
        for a in [8, 12, 16, 20, 24, 28, 32]:
            for b in [0, 990, 1980, 2970, 3960, 5940, 7920]:
                for c in [990, 1980, 2970, 3960, 4950, 5940]:
                    e = [math.log(predict(r, a, b, c) / r["measured"]) for r in rows if sel(r)]
                    rms = math.sqrt(sum(x * x for x in e) / len(e))
                    if best is None or rms < best[0]:
                        best = (rms, a, b, c)
        return best

    rms, a, b, c = fit(lambda r: True)
    e = [math.log(predict(r, a, b, c) / r["measured"]) for r in rows]
    print("fit on all: issues per score %g, block cycles %g, chunk cycles %g: RMS of log %.3f, within 25%%: %d of %d"
          % (a, b, c, rms, sum(1 for x in e if abs(x) <= math.log(1.25)), len(e)))
    models = sorted({r["id"].split(".")[1] for r in rows})
    half = set(models[::2])
    for name, sel in [("half A", lambda r: r["id"].split(".")[1] in half), ("half B", lambda r: r["id"].split(".")[1] not in half)]:
        rms, a, b, c = fit(sel)
        e = [math.log(predict(r, a, b, c) / r["measured"]) for r in rows if not sel(r)]
        print("fit on %s (%g, %g, %g), scored on the other half: RMS of log %.3f, within 25%%: %d of %d"
              % (name, a, b, c, math.sqrt(sum(x * x for x in e) / len(e)), sum(1 for x in e if abs(x) <= math.log(1.25)), len(e)))
    print("half A's source models:", " ".join(sorted(half)))


if __name__ == "__main__":
    main()
