#!/usr/bin/env python3
"""How far the shard-plan search's heuristic (forward pass and coordinate descent) is from the
optimum under its own price: `tessel shard --z3-bound MS` on models x specs x meshes, with the
enumeration off (--exhaustive 0) so that every row is the heuristic's plan. Nothing runs on a
device: these are the plan search's prices (docs/distributed.md, "Plan search").

  run_bound.py [--tessel build/default/tessel] [--out DIR] [--z3-ms 60000]

Writes DIR/bound.csv (model, spec, mesh, heuristic_ms, bound_ms, proved, z3_plan_ms, kept,
choices, z3_s, search_s) and prints a table. Progress on a terminal, quiet when piped.
"""
import argparse
import csv
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "experiments", "distributed"))
import run_tp  # noqa: E402  (the LLaMA-7B MLP model)

CASES = [  # (model, spec, meshes)
    ("mlp_m8192", "nvidia-dgx-h100", ["2", "4", "8"]),
    ("bert_base_layer", "nvidia-dgx-h100", ["2", "4", "8", "2x4"]),
    ("bert_base_layer", "x86-64-avx512-cluster-16", ["2", "4", "8"]),
    ("vit_b_block", "nvidia-dgx-h100", ["2", "4", "8"]),
    ("llama_decoder_block", "nvidia-dgx-h100", ["2", "4", "8", "2x4"]),
    ("llama_decoder_block", "x86-64-avx512-cluster-16", ["2", "4", "8"]),
]
LINE = re.compile(r"z3 bound: no plan under ([0-9.e+-]+) ms \((proved|the bound when time ran out), (\d+) choices, ([0-9.e+-]+) s\); "
                  r"the search's plan ([0-9.e+-]+) ms is .*?(?:; z3's plan priced ([0-9.e+-]+) ms( \(kept\))?)?$")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tessel", default=os.path.join(ROOT, "build", "default", "tessel"))
    p.add_argument("--out", default=os.path.join(HERE, "results"))
    p.add_argument("--z3-ms", type=int, default=60000)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    tty = sys.stderr.isatty()
    work = tempfile.mkdtemp()
    mlp = os.path.join(work, "mlp_m8192.json")
    with open(mlp, "w") as fh:
        json.dump(run_tp.mlp_model(8192), fh)
    rows = []
    total = sum(len(m) for _, _, m in CASES)
    for model, spec, meshes in CASES:
        path = mlp if model.startswith("mlp") else os.path.join(ROOT, "experiments", "models", model + ".json")
        for mesh in meshes:
            if tty:
                print("\r[%d/%d] %s on %s, mesh %s   " % (len(rows) + 1, total, model, spec, mesh), end="", file=sys.stderr, flush=True)
            cmd = [a.tessel, "shard", path, "--hw", os.path.join(ROOT, "hw_specs", spec + ".json"), "--mesh", mesh,
                   "--exhaustive", "0", "--no-schedule", "--z3-bound", str(a.z3_ms)]
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=a.z3_ms / 1000 + 600)
            text = out.stdout + out.stderr
            search = re.search(r"searched \d+ plans in ([0-9.e+-]+) s", text)
            m = next((LINE.search(l) for l in text.splitlines() if l.startswith("z3 bound:")), None)
            row = {"model": model, "spec": spec, "mesh": mesh, "rc": out.returncode}
            if m:
                row.update(bound_ms=float(m.group(1)), proved=m.group(2) == "proved", choices=int(m.group(3)), z3_s=float(m.group(4)),
                           heuristic_ms=float(m.group(5)), z3_plan_ms=float(m.group(6)) if m.group(6) else "",
                           kept=bool(m.group(7)), search_s=float(search.group(1)) if search else "")
            else:
                row["error"] = text.strip().splitlines()[-1] if text.strip() else "no output"
            rows.append(row)
    if tty:
        print(file=sys.stderr)
    keys = ["model", "spec", "mesh", "heuristic_ms", "bound_ms", "proved", "z3_plan_ms", "kept", "choices", "z3_s", "search_s", "rc", "error"]
    with open(os.path.join(a.out, "bound.csv"), "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in keys})
    print("| model | spec | mesh | heuristic ms | z3 bound ms | heuristic / bound | z3's plan ms | z3 s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "bound_ms" not in r:
            print("| %s | %s | %s | error: %s | | | | |" % (r["model"], r["spec"], r["mesh"], r.get("error")))
            continue
        gap = r["heuristic_ms"] / r["bound_ms"] if r["bound_ms"] > 0 else float("nan")
        print("| %s | %s | %s | %.4f | %.4f%s | %.3f | %s%s | %.1f |" % (
            r["model"], r["spec"], r["mesh"], r["heuristic_ms"], r["bound_ms"], "" if r["proved"] else " (time ran out)", gap,
            "%.4f" % r["z3_plan_ms"] if r["z3_plan_ms"] != "" else "-", " (kept)" if r["kept"] else "", r["z3_s"]))


if __name__ == "__main__":
    main()
