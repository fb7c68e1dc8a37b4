#!/usr/bin/env python3
"""Forms of the wgmma GEMM kernel side by side (kernels/cuda/device/wgmma.cuh): the same
schedule of an op-sweep GEMM written once per variant -- the wgmma group's recorded parameters
edited (block_n, stages, persistent, pingpong) -- each checked against the interpreter (in
parallel), then all timed in interleaved rounds as the sweep times Tessel (`tessel run --time N`:
CUDA-graph replays between events, L2 warm), on one GPU. The cost model's prediction for each
variant (the replayed schedule is priced again) is recorded beside its time.

  run_variants.py --tessel dist/tessel/bin/tessel --out DIR [--ids ID ...] [--variants V ...]
A variant is NAME or NAME:key=value,key=value (as_scheduled: no edit; key=- removes a key, as
a flag that is off is not recorded). Default: as_scheduled,
cooperative 128- and 256-wide tiles on the persistent grid, and ping-pong. The persistent A/B of
2026-11-27 is `--variants as_scheduled per_tile:persistent=-`.
Writes DIR/variants.csv (id, variant, params, ms per round, median, predicted) and prints a table
with each GEMM's fastest variant. Needs a GPU; Python 3 standard library only.
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
# Default: op-sweep GEMMs with more 128 x 128 tiles than SMs, across models, K and N.
DEFAULT_IDS = [
    "gemm.bert.attn_out.m16384", "gemm.bert.ffn_up.m4096", "gemm.bert.qkv.m4096", "gemm.gpt2.attn_out.m8192",
    "gemm.gpt2.ffn_up.m2048", "gemm.vit_b16.qkv.m6304", "gemm.vit_b16.ffn_down.m6304", "gemm.vit_l16.attn_out.m6304",
    "gemm.whisper.qkv.m6000", "gemm.whisper.ffn_up.m6000", "gemm.llama7b.qkv.m8192", "gemm.llama70b.qkv.m512",
    "gemm.llama70b.lm_head.m2048", "gemm.bert.mlm_head.m4096", "gemm.convnext_t.pw1_c384.b32", "gemm.sd_unet.geglu_c320.m8192",
]
DEFAULT_VARIANTS = ["as_scheduled", "coop128:block_n=128,stages=6,persistent=1,pingpong=-,cluster_m=-",
                    "coop256:block_n=256,stages=4,persistent=1,pingpong=-,cluster_m=-", "pingpong:block_n=128,stages=6,persistent=1,pingpong=1,cluster_m=-"]


def run(cmd, timeout=600):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired:
        return "timeout", ""


def parse_variant(text):
    name, _, edits = text.partition(":")
    params = {}
    for kv in filter(None, edits.split(",")):
        k, _, v = kv.partition("=")
        params[k] = None if v == "-" else int(v)
    return name, params


def model_and_schedule(args, iid, name):
    """Writes op-sweep instance `iid`'s model under args.out/work/iid and schedules it there as
    `name` with the current binary. Returns (work folder, model, schedule, error or None)."""
    work = os.path.join(args.out, "work", iid)
    os.makedirs(work, exist_ok=True)
    inst = {i.id: i for i in catalog.instances()}[iid]
    model = os.path.join(work, "model.json")
    with open(model, "w", encoding="utf-8") as fh:
        fh.write(gm.render(inst.build().document()) + "\n")
    schedule = os.path.join(work, name)
    rc, text = run([args.tessel, "schedule", model, "--hw", SPEC, "-o", schedule])
    return work, model, schedule, None if rc == 0 else "schedule: " + text[-300:]


def prepare(args, iid, variants):
    """The model, one schedule per variant, a check and a prediction of each."""
    work, model, base, error = model_and_schedule(args, iid, "as_scheduled.json")
    if error:
        return {"id": iid, "error": error}
    with open(base) as f:
        scheduled = json.load(f)
    if not any(g.get("kernel", {}).get("family") == "wgmma" for g in scheduled["groups"]):
        return {"id": iid, "error": "no wgmma kernel in its schedule"}
    row = {"id": iid, "model": model, "variants": {}}
    for name, edits in variants:
        s = json.loads(json.dumps(scheduled))
        params = ""
        for g in s["groups"]:
            k = g.get("kernel", {})
            if k.get("family") != "wgmma":
                continue
            for key, value in edits.items():
                if value is None:
                    k["params"].pop(key, None)
                else:
                    k["params"][key] = value
            params = " ".join("%s=%d" % kv for kv in sorted(k["params"].items()))
        path = os.path.join(work, name + ".json")
        with open(path, "w") as f:
            json.dump(s, f)
        v = {"schedule": path, "params": params, "cache": os.path.join(work, "cache-" + name)}
        check(args, model, v, os.path.join(work, name + ".check.json"))
        row["variants"][name] = v
    return row


def check(args, model, v, rep):
    """Runs schedule v["schedule"] of `model` once with --check (kernels cached in v["cache"]);
    sets v["correct"], v["error"] when not, and v["predicted_ms"]: a replayed schedule is priced
    again (driver/compile.cpp), so this is the edited schedule's prediction."""
    rc, text = run([args.tessel, "run", model, "--device", "cuda", "--hw", SPEC, "--schedule", v["schedule"], "--check",
                    "--cache", v["cache"], "--report", rep])
    report = json.load(open(rep)) if rc == 0 and os.path.exists(rep) else {}
    v["correct"] = bool(report) and all(o.get("ok") for o in report.get("outputs", [{}]))
    if not v["correct"]:
        v["error"] = text.strip().splitlines()[-1][:200] if text.strip() else str(rc)
    v["predicted_ms"] = 1e3 * report["predicted_s"] if report.get("predicted_s") else None


def time_one(args, row, v):
    rep = os.path.join(os.path.dirname(row["model"]), "time.json")
    rc, _ = run([args.tessel, "run", row["model"], "--device", "cuda", "--hw", SPEC, "--schedule", v["schedule"],
                 "--cache", v["cache"], "--report", rep, "--time", str(args.repeats)])
    if rc != 0 or not os.path.exists(rep):
        return None
    t = 1e3 * json.load(open(rep))["median_s"]
    os.remove(rep)
    return t


def time_rounds(args, row, schedules):
    """The correct ones of `schedules` (name -> v, checked by check()) timed in args.rounds
    interleaved rounds, the order reversed every other round; the others are reported. Returns
    (the correct (name, v) pairs, name -> times in ms, name -> median)."""
    ok = [(n, v) for n, v in schedules.items() if v["correct"]]
    for n, v in schedules.items():
        if not v["correct"]:
            print("%-48s %-12s not run: %s" % (row["id"], n, v.get("error", "")), flush=True)
    times = {n: [] for n, _ in ok}
    for r in range(args.rounds):
        for n, v in (ok if r % 2 == 0 else ok[::-1]):
            t = time_one(args, row, v)
            if t:
                times[n].append(t)
    return ok, times, {n: statistics.median(ts) for n, ts in times.items() if ts}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tessel", default=os.path.join(ROOT, "dist", "tessel", "bin", "tessel"))
    p.add_argument("--out", required=True)
    p.add_argument("--ids", nargs="+", help="instance ids without the dtype")
    p.add_argument("--dtypes", nargs="+", default=["f16"])
    p.add_argument("--variants", nargs="+", default=DEFAULT_VARIANTS)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 4)
    args = p.parse_args()
    variants = [parse_variant(v) for v in args.variants]
    ids = [i + "." + d for i in (args.ids or DEFAULT_IDS) for d in args.dtypes]
    known = {i.id for i in catalog.instances()}
    ids = [i for i in ids if i in known]
    os.makedirs(args.out, exist_ok=True)
    with cf.ThreadPoolExecutor(args.jobs) as ex:
        rows = list(ex.map(lambda i: prepare(args, i, variants), ids))
    out, wins = [], {}
    for row in rows:
        if row.get("error"):
            print("%-40s skipped: %s" % (row["id"], row["error"][:200]), flush=True)
            continue
        ok, times, medians = time_rounds(args, row, row["variants"])
        if not medians:
            continue
        best = min(medians, key=medians.get)
        wins[best] = wins.get(best, 0) + 1
        for n, v in ok:
            if n not in medians:
                continue
            out.append({"id": row["id"], "variant": n, "params": v["params"], "median_ms": medians[n],
                        "rounds_ms": " ".join("%.4f" % t for t in times[n]), "predicted_ms": v["predicted_ms"],
                        "over_fastest": medians[n] / medians[best]})
        print("%-40s %s  fastest %s" % (row["id"], "  ".join("%s %.4f" % (n, t) for n, t in medians.items()), best), flush=True)
    with open(os.path.join(args.out, "variants.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["id", "variant", "params", "median_ms", "rounds_ms", "predicted_ms", "over_fastest"])
        w.writeheader()
        w.writerows(out)
    names = [n for n, _ in variants]
    for n in names:
        r = [x["over_fastest"] for x in out if x["variant"] == n]
        if r:
            print("%-14s geomean time over each GEMM's fastest variant %.3f over %d GEMMs; fastest on %d"
                  % (n, math.exp(sum(map(math.log, r)) / len(r)), len(r), wins.get(n, 0)))


if __name__ == "__main__":
    main()
