#!/usr/bin/env python3
"""The fit of the cost model's wgmma form terms (cost_model/analytic_model.cpp: kWgEpilogueIssuesPerOutput,
kWgPingpongEpilogueFactor, kWgWideTileEfficiency, and the spec's wgmma family_efficiency) to a
run_variants.py measurement of the cooperative 128- and 256-wide forms and ping-pong.

For every GEMM and form in VARIANTS_CSV, the form's schedule is priced by the local `tessel explain`
(its terms: compute, each memory level, launch, fill); the script then recomputes the prediction
for a grid of (issue slots per output E, ping-pong factor F, family efficiency, wide-tile factor)
the way the model combines them (docs/cost-model.md), and prints for each setting the share of
GEMMs whose cheapest-priced form is the fastest measured, the geomean of measured(pick) /
measured(fastest), and the rms log error of all predictions. No GPU needed.

  python3 experiments/wgmma_variants/fit_epilogue.py VARIANTS_CSV [--tessel build/default/tessel]
"""
import argparse
import csv
import json
import math
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "experiments", "op_sweep"))
import instances as catalog  # noqa: E402
sys.path.insert(0, os.path.join(ROOT, "experiments", "models"))
import generate_models as gm  # noqa: E402

SPEC = os.path.join(ROOT, "hw_specs", "nvidia-h100-sxm.json")
FORMS = {"coop128": {"block_n": 128, "stages": 6, "persistent": 1, "pingpong": None, "cluster_m": None},
         "coop256": {"block_n": 256, "stages": 4, "persistent": 1, "pingpong": None, "cluster_m": None},
         "pingpong": {"block_n": 128, "stages": 6, "persistent": 1, "pingpong": 1, "cluster_m": None}}
BM = 128


def terms_of(tessel, model, schedule):
    """Per wgmma kernel of the explained schedule: its named terms in seconds."""
    out = subprocess.run([tessel, "explain", model, "--hw", SPEC, "--schedule", schedule], capture_output=True,
                         text=True).stdout
    kernels = []
    for block in out.split("\nkernel ")[1:]:
        family = re.search(r"family    (\S+)", block).group(1)
        line = re.search(r"terms     (.*)", block).group(1)
        kernels.append((family, {k: float(v) * 1e-3 for k, v in re.findall(r"(\w+) ([0-9.]+) ms", line)}))
    return kernels


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("variants_csv")
    p.add_argument("--tessel", default=os.path.join(ROOT, "build", "default", "tessel"))
    args = p.parse_args()
    spec = json.load(open(SPEC))
    units = spec["compute"]["units"]
    unit_issue = spec["compute"]["simt_peak_tflops"]["f32"] * 1e12 / 2 / units
    unit_peak = spec["compute"]["tensor_peak_tflops"]["f16"] * 1e12 / units

    measured = {}
    for r in csv.DictReader(open(args.variants_csv)):
        if r["variant"] in FORMS and r["median_ms"]:
            measured.setdefault(r["id"], {})[r["variant"]] = float(r["median_ms"]) * 1e-3
    known = {i.id: i for i in catalog.instances()}
    work = tempfile.mkdtemp(prefix="fit_epilogue_")
    data = {}
    for iid in measured:
        doc = known[iid].build().document()
        model = os.path.join(work, iid + ".json")
        with open(model, "w") as f:
            f.write(gm.render(doc) + "\n")
        base = os.path.join(work, iid + ".schedule.json")
        subprocess.run([args.tessel, "schedule", model, "--hw", SPEC, "-o", base], capture_output=True, check=True)
        scheduled = json.load(open(base))
        shapes = {t["name"]: t["shape"] for t in doc["inputs"] + doc["weights"]}
        op = next(o for o in doc["ops"] if o["op"] in ("MatMul", "Gemm"))
        a, b = shapes[op["inputs"][0]], shapes[op["inputs"][1]]
        m, k, n = math.prod(a[:-1]), a[-1], b[-1]
        for form, edits in FORMS.items():
            s = json.loads(json.dumps(scheduled))
            for g in s["groups"]:
                kern = g.get("kernel", {})
                if kern.get("family") == "wgmma":
                    for key, value in edits.items():
                        if value is None:
                            kern["params"].pop(key, None)
                        else:
                            kern["params"][key] = value
            path = os.path.join(work, iid + "." + form + ".json")
            json.dump(s, open(path, "w"))
            data[iid, form] = (terms_of(args.tessel, model, path), m, n, k)

    def predict(iid, form, e, f, eff, wide):
        kernels, m, n, k = data[iid, form]
        bn = FORMS[form]["block_n"]
        blocks = math.ceil(math.ceil(m / BM) * math.ceil(n / bn) / units)
        total = 0.0
        for family, t in kernels:
            if family != "wgmma":
                total += sum(t.values())
                continue
            worst = max(t.get("compute", 0), *(v for key, v in t.items() if key not in ("compute", "launch", "epilogue", "fill")))
            epilogue = BM * bn * e / unit_issue
            if form == "pingpong":
                turn = f * epilogue
                exposed = turn + blocks * max(0.0, turn - 2 * BM * bn * k / unit_peak)
            else:
                exposed = blocks * epilogue
            total += t.get("launch", 0) + (worst + exposed + t.get("fill", 0)) / (eff * (wide if bn == 256 else 1.0))
        return total

    def score(e, f, eff, wide):
        err, n, picks, regret = 0.0, 0, 0, []
        for iid, times in measured.items():
            pred = {v: predict(iid, v, e, f, eff, wide) for v in times}
            err += sum(math.log(pred[v] / times[v]) ** 2 for v in times)
            n += len(times)
            pick, best = min(pred, key=pred.get), min(times, key=times.get)
            picks += pick == best
            regret.append(times[pick] / times[best])
        return picks, math.exp(sum(map(math.log, regret)) / len(regret)), math.sqrt(err / n)

    rows = []
    for e in (24, 32, 40, 48, 56, 64):
        for f in (1.5, 2, 2.5, 3, 4):
            for eff in (0.9, 0.96, 1.0, 1.05):
                for wide in (1.0, 0.95, 0.9):
                    rows.append(((e, f, eff, wide), score(e, f, eff, wide)))
    rows.sort(key=lambda r: (r[1][1], r[1][2]))
    print("E     F    eff   wide  picks  regret  rms-log   (best 15 by regret, then rms)")
    for (e, f, eff, wide), (picks, regret, rms) in rows[:15]:
        print(f"{e:<5} {f:<4} {eff:<5} {wide:<5} {picks:>2}/{len(measured):<3} {regret:.3f}   {rms:.3f}")


if __name__ == "__main__":
    main()
