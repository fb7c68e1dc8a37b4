#!/usr/bin/env python3
"""A/B of the persistent wgmma kernel (kernels/cuda/device/wgmma.cuh, run_tiles) against one block
per tile, on op-sweep GEMMs that take the wgmma family: the same schedule twice, once as the policy
recorded it (persistent when the tiles outnumber the SMs) and once with `persistent` removed from
the kernel's parameters. Each variant is checked against the interpreter once (in parallel), then
both are timed in interleaved rounds as the sweep times Tessel (`tessel run --time N`: CUDA-graph
replays between events, L2 warm), on one GPU.

  run_ab.py --tessel dist/tessel/bin/tessel --out DIR [--ids ID ...] [--every N] [--rounds R]
Writes DIR/ab.csv (id, tiles, persistent_ms, per_tile_ms, speedup per round and median) and prints
a table. Needs a GPU; Python 3 standard library only.
"""
import argparse
import concurrent.futures as cf
import csv
import json
import math
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "experiments", "op_sweep"))
import instances as catalog  # noqa: E402
sys.path.insert(0, os.path.join(ROOT, "experiments", "models"))
import generate_models as gm  # noqa: E402

SPEC = os.path.join(ROOT, "hw_specs", "nvidia-h100-sxm.json")
# Default: GEMMs of the op sweep across models, sizes and both 16-bit dtypes.
DEFAULT_IDS = [
    "gemm.bert.qkv.m4096", "gemm.bert.attn_out.m4096", "gemm.bert.ffn_up.m4096", "gemm.bert.ffn_down.m4096",
    "gemm.vit_b16.attn_out.m6304", "gemm.gpt2.qkv.m8192", "gemm.whisper.qkv.m1500", "gemm.llama7b.lm_head.m8192",
    "gemm.gpt2.lm_head.m1024", "gemm.dlrm.odd_1023.m2048",
]


def run(cmd, timeout=600):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired:
        return "timeout", ""


def prepare(args, iid):
    """Model, the two schedules, a check of each. Returns a dict or None (with the reason)."""
    work = os.path.join(args.out, "work", iid)
    os.makedirs(work, exist_ok=True)
    inst = {i.id: i for i in catalog.instances()}[iid]
    model = os.path.join(work, "model.json")
    with open(model, "w", encoding="utf-8") as fh:
        fh.write(gm.render(inst.build().document()) + "\n")
    sched = {"persistent": os.path.join(work, "persistent.json"), "per_tile": os.path.join(work, "per_tile.json")}
    rc, text = run([args.tessel, "schedule", model, "--hw", SPEC, "-o", sched["persistent"]])
    if rc != 0:
        return {"id": iid, "error": "schedule: " + text[-300:]}
    with open(sched["persistent"]) as f:
        s = json.load(f)
    tiles, flagged = 0, 0
    for g in s["groups"]:
        k = g.get("kernel", {})
        if k.get("family") == "wgmma":
            flagged += k["params"].pop("persistent", 0)
    if not flagged:
        return {"id": iid, "error": "no persistent wgmma kernel in its schedule"}
    with open(sched["per_tile"], "w") as f:
        json.dump(s, f)
    row = {"id": iid, "model": model, "sched": sched}
    for v, path in sched.items():
        rep = os.path.join(work, v + ".check.json")
        rc, text = run([args.tessel, "run", model, "--device", "cuda", "--hw", SPEC, "--schedule", path, "--check",
                        "--cache", os.path.join(work, "cache-" + v), "--report", rep])
        ok = rc == 0 and os.path.exists(rep) and all(o.get("ok") for o in json.load(open(rep)).get("outputs", [{}]))
        row[v + "_correct"] = ok
        if not ok:
            row["error"] = v + ": " + text[-300:]
    return row


def time_one(args, row, v):
    work = os.path.dirname(row["model"])
    rep = os.path.join(work, v + ".time.json")
    rc, _ = run([args.tessel, "run", row["model"], "--device", "cuda", "--hw", SPEC, "--schedule", row["sched"][v],
                 "--cache", os.path.join(work, "cache-" + v), "--report", rep, "--time", str(args.repeats)])
    if rc != 0 or not os.path.exists(rep):
        return None
    return 1e3 * json.load(open(rep))["median_s"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tessel", default=os.path.join(ROOT, "dist", "tessel", "bin", "tessel"))
    p.add_argument("--out", required=True)
    p.add_argument("--ids", nargs="+", help="instance ids without the dtype (both f16 and bf16 are run)")
    p.add_argument("--dtypes", nargs="+", default=["f16", "bf16"])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 4)
    args = p.parse_args()
    ids = [i + "." + d for i in (args.ids or DEFAULT_IDS) for d in args.dtypes]
    known = {i.id for i in catalog.instances()}
    ids = [i for i in ids if i in known]
    os.makedirs(args.out, exist_ok=True)
    with cf.ThreadPoolExecutor(args.jobs) as ex:
        rows = list(ex.map(lambda i: prepare(args, i), ids))
    results = []
    for row in rows:
        if row.get("error") or not row.get("persistent_correct") or not row.get("per_tile_correct"):
            print("%-40s skipped: %s" % (row["id"], row.get("error", "")[:200]), flush=True)
            continue
        times = {"persistent": [], "per_tile": []}
        for r in range(args.rounds):
            for v in (("persistent", "per_tile") if r % 2 == 0 else ("per_tile", "persistent")):
                t = time_one(args, row, v)
                if t:
                    times[v].append(t)
        if not times["persistent"] or not times["per_tile"]:
            continue
        a, b = statistics.median(times["persistent"]), statistics.median(times["per_tile"])
        results.append({"id": row["id"], "persistent_ms": a, "per_tile_ms": b, "speedup": b / a,
                        "persistent_rounds": " ".join("%.4f" % t for t in times["persistent"]),
                        "per_tile_rounds": " ".join("%.4f" % t for t in times["per_tile"])})
        print("%-40s persistent %.4f ms  one block per tile %.4f ms  %.2fx" % (row["id"], a, b, b / a), flush=True)
    with open(os.path.join(args.out, "ab.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["id", "persistent_ms", "per_tile_ms", "speedup", "persistent_rounds", "per_tile_rounds"])
        w.writeheader()
        w.writerows(results)
    if results:
        g = math.exp(sum(math.log(r["speedup"]) for r in results) / len(results))
        print("geomean speedup of the persistent kernel over one block per tile: %.3f over %d GEMMs" % (g, len(results)))


if __name__ == "__main__":
    main()
