#!/usr/bin/env python3
"""How well the cost model ranks the configurations Tessel can emit (issue 24, item 3).

For a stratified, seeded sample of operator instances from the op sweep (../op_sweep/instances.py,
every class), `tessel schedule --tune K` schedules each with welder, takes each fused group's K
best tilings by the cost model (the policy's own choice first), and compiles, checks against the
interpreter and times every one on the device (driver/measure.h: CUDA-graph replays between
events, L2 warm, the median of 20). Each group's candidates, predicted and measured, land in the
schedule's "trials"; this script reads them back and reports, per operator (its slowest group)
and per class:

  - Spearman rho between predicted and measured time over the candidates,
  - top-1 regret: the model's top-1 measured / the best measured (within 10%: <= 1.10),
  - tune-10: the best of the model's 10 best measured / the best measured (within 3%: <= 1.03),
  - measured / predicted per kernel family (how far off the absolute prediction is).

  # on the GPU machine, from the repository root with the bundle unpacked (scripts/device_run fidelity):
  python3 experiments/cost_model_fidelity/run_fidelity.py --tessel dist/tessel/bin/tessel --out OUT
  # anywhere, from the schedules a run left:
  python3 experiments/cost_model_fidelity/run_fidelity.py --render OUT
"""
import argparse
import concurrent.futures
import csv
import json
import math
import os
import random
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "experiments", "op_sweep"))
from run_sweep import spearman  # noqa: E402  (the op sweep's rank correlation, ties averaged)

# Instances per class (33 in all); attention's streamed (flash) groups are a fixed template and have
# one configuration, so the decode and small-batch instances that run as fused groups are drawn too.
DEFAULT_PER_CLASS = "gemm=12,conv=8,row=5,eltwise=3,pool=2,attention=3"
MAX_FLOPS = 5e10  # keeps every candidate's timing short; the sweep's largest shapes add nothing here


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class ModelFile:
    """A model given on the command line (--models) in place of an op-sweep instance."""

    def __init__(self, path):
        self.path = path
        self.id = os.path.splitext(os.path.basename(path))[0]
        self.cls = self.id.split(".")[0].split("_")[0]
        self.family = "given"
        self.description = path
        self.flops = 0.0


def select(args):
    if args.models:
        return [ModelFile(p) for p in args.models]
    import instances as catalog
    pool = [i for i in catalog.instances() if i.dtype == args.dtype and i.flops <= MAX_FLOPS]
    if args.only:
        chosen = [i for i in catalog.instances() if i.id in set(args.only)]
        # --as-dtype: the same operators in another dtype (f32 for a CPU spec).
        return [catalog.Instance(i.proto, args.as_dtype) for i in chosen] if args.as_dtype else chosen
    rng = random.Random(args.seed)
    chosen = []
    for part in args.per_class.split(","):
        cls, n = part.split("=")
        members = sorted((i for i in pool if i.cls == cls), key=lambda i: i.id)
        rng.shuffle(members)
        chosen += members[: int(n)]
    return chosen


def run_one(args, inst, work):
    if isinstance(inst, ModelFile):
        model = inst.path
    else:
        import instances as catalog
        model = os.path.join(work, "models", inst.id + ".json")
        with open(model, "w") as f:
            f.write(catalog.gm.render(inst.build().document()) + "\n")
    sched = os.path.join(args.out, "schedules", inst.id + ".json")
    cmd = [args.tessel, "schedule", model, "--hw", args.hw, "--tune", str(args.k),
           "--cache", os.path.join(work, "cache", inst.id), "--time-lock", os.path.join(work, "time.lock"), "-o", sched]
    start = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        rc, err = p.returncode, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, err = "timeout", (e.stderr or b"").decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
    with open(os.path.join(args.out, "logs", inst.id + ".log"), "w") as f:
        f.write(" ".join(cmd) + "\n" + err)
    return inst, rc, time.time() - start


def measure(args):
    work = args.work
    for d in ("models", "cache"):
        os.makedirs(os.path.join(work, d), exist_ok=True)
    for d in ("schedules", "logs"):
        os.makedirs(os.path.join(args.out, d), exist_ok=True)
    chosen = select(args)
    meta = {i.id: {"class": i.cls, "family": i.family, "description": i.description, "flops": i.flops} for i in chosen}
    with open(os.path.join(args.out, "instances.json"), "w") as f:
        json.dump(meta, f, indent=1)
    log("fidelity: %d instances, top %d tilings of each group, %d jobs" % (len(chosen), args.k, args.jobs))
    deadline = time.time() + args.time_budget if args.time_budget else None
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as ex:
        futures = []
        for inst in chosen:
            futures.append(ex.submit(lambda i=inst: None if deadline and time.time() > deadline else run_one(args, i, work)))
        for n, fut in enumerate(concurrent.futures.as_completed(futures), 1):
            r = fut.result()
            if r is None:
                continue
            inst, rc, secs = r
            log("[%d/%d] %s: rc=%s in %.0f s" % (n, len(chosen), inst.id, rc, secs))


# ---- Report -----------------------------------------------------------------------------------

def geomean(v):
    v = [x for x in v if x and x > 0]
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else None


def median(v):
    v = sorted(x for x in v if x is not None)
    if not v:
        return None
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def fmt(x, spec="%.2f"):
    return "-" if x is None else spec % x


def render(args):
    out = args.render
    with open(os.path.join(out, "instances.json")) as f:
        meta = json.load(f)
    trials_rows, ops = [], []
    for op_id, m in sorted(meta.items()):
        path = os.path.join(out, "schedules", op_id + ".json")
        if not os.path.exists(path):
            ops.append({"id": op_id, "class": m["class"], "status": "not run"})
            continue
        with open(path) as f:
            sched = json.load(f)
        groups = [g for g in sched["groups"] if g.get("trials")]
        for gi, g in enumerate(sched["groups"]):
            for rank, t in enumerate(g.get("trials", [])):
                trials_rows.append({"id": op_id, "class": m["class"], "group": gi, "rank": rank, "family": t["family"],
                                    "params": t.get("params", ""),
                                    "predicted_s": t["predicted_s"], "measured_s": t.get("measured_s", ""),
                                    "failure": t.get("failure", ""), "tiles": t["tiles"]})
        if not groups:
            ops.append({"id": op_id, "class": m["class"], "status": "no tunable group (%d groups)" % len(sched["groups"])})
            continue
        # The operator's slowest group (by its best measured time) is the one that matters.
        main = max(groups, key=lambda g: g.get("measured_s") or 0)
        t = main["trials"]
        timed = [x for x in t if x.get("measured_s")]
        best = min(x["measured_s"] for x in timed) if timed else None
        row = {"id": op_id, "class": m["class"], "status": "ok" if timed else "nothing measured", "groups": len(sched["groups"]),
               "candidates": len(t), "measured": len(timed), "families": ",".join(sorted({x["family"] for x in t})),
               "rho": spearman([x["predicted_s"] for x in timed], [x["measured_s"] for x in timed]),
               "best_ms": best * 1e3 if best else None}
        if timed and t[0].get("measured_s"):
            row["top1_regret"] = t[0]["measured_s"] / best
        top10 = [x["measured_s"] for x in t[:10] if x.get("measured_s")]
        if top10:
            row["tune10_regret"] = min(top10) / best
        if timed:
            row["pred_over_meas_top1"] = t[0]["predicted_s"] / t[0]["measured_s"] if t[0].get("measured_s") else None
        ops.append(row)

    with open(os.path.join(out, "trials.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["id", "class", "group", "rank", "family", "params", "predicted_s", "measured_s", "failure", "tiles"])
        w.writeheader()
        w.writerows(trials_rows)
    keys = ["id", "class", "status", "groups", "candidates", "measured", "families", "rho", "top1_regret", "tune10_regret",
            "best_ms", "pred_over_meas_top1"]
    with open(os.path.join(out, "operators.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        w.writerows(ops)

    ok = [o for o in ops if o.get("status") == "ok"]
    lines = ["# Cost-model fidelity: predicted vs measured over each operator's candidate tilings", ""]
    lines.append("Operators: %d drawn, %d measured; %d candidates timed in all (%d not measurable)." % (
        len(ops), len(ok), sum(1 for r in trials_rows if r["measured_s"] != ""),
        sum(1 for r in trials_rows if r["measured_s"] == "")))
    lines.append("")
    lines.append("| class | operators | candidates per op (median) | Spearman rho (median) | rho >= 0.9 | top-1 within 10% | tune-10 within 3% |")
    lines.append("|---|---|---|---|---|---|---|")
    classes = sorted({o["class"] for o in ok})
    for cls in classes + ["all"]:
        mem = [o for o in ok if cls == "all" or o["class"] == cls]
        rhos = [o["rho"] for o in mem if o.get("rho") is not None]
        t1 = [o for o in mem if o.get("top1_regret")]
        t10 = [o for o in mem if o.get("tune10_regret")]
        lines.append("| %s | %d | %s | %s | %d/%d | %d/%d | %d/%d |" % (
            cls, len(mem), fmt(median([o["measured"] for o in mem]), "%.0f"), fmt(median(rhos)),
            sum(1 for r in rhos if r >= 0.9), len(rhos),
            sum(1 for o in t1 if o["top1_regret"] <= 1.10), len(t1),
            sum(1 for o in t10 if o["tune10_regret"] <= 1.03), len(t10)))
    lines.append("")
    lines.append("Absolute error, per kernel family (every timed candidate): measured / predicted.")
    lines.append("")
    lines.append("| family | candidates | geomean | min | max |")
    lines.append("|---|---|---|---|---|")
    fams = {}
    for r in trials_rows:
        if r["measured_s"] != "" and r["predicted_s"] > 0:
            fams.setdefault(r["family"], []).append(r["measured_s"] / r["predicted_s"])
    for fam, v in sorted(fams.items()):
        lines.append("| %s | %d | %.2f | %.2f | %.2f |" % (fam, len(v), geomean(v), min(v), max(v)))
    lines.append("")
    lines.append("Per operator (its slowest group):")
    lines.append("")
    lines.append("| operator | families | timed | rho | top-1 regret | tune-10 regret | best ms | predicted/measured (top-1) |")
    lines.append("|---|---|---|---|---|---|---|---|")
    for o in ops:
        if o.get("status") != "ok":
            lines.append("| %s | %s | | | | | | |" % (o["id"], o.get("status")))
            continue
        lines.append("| %s | %s | %d/%d | %s | %s | %s | %s | %s |" % (
            o["id"], o["families"], o["measured"], o["candidates"], fmt(o.get("rho")), fmt(o.get("top1_regret")),
            fmt(o.get("tune10_regret")), fmt(o.get("best_ms"), "%.4f"), fmt(o.get("pred_over_meas_top1"))))
    failures = {}
    for r in trials_rows:
        if r["measured_s"] == "":
            failures.setdefault(r["failure"][:160], 0)
            failures[r["failure"][:160]] += 1
    if failures:
        lines += ["", "Candidates not measured, by reason:", ""]
        for why, n in sorted(failures.items(), key=lambda kv: -kv[1])[:15]:
            lines.append("- %d x %s" % (n, why or "(no reason given)"))
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines[:20]))
    plot(out, trials_rows, ops)


def plot(out, trials_rows, ops):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("no matplotlib: no plots")
        return
    # Per operator, candidates' predicted and measured times normalised by the operator's best of each:
    # a perfect model puts every point on the diagonal's ranks.
    classes = sorted({o["class"] for o in ops if o.get("status") == "ok"})
    fig, axes = plt.subplots(1, len(classes), figsize=(4 * len(classes), 4), squeeze=False)
    for ax, cls in zip(axes[0], classes):
        for o in (o for o in ops if o.get("status") == "ok" and o["class"] == cls):
            rows = [r for r in trials_rows if r["id"] == o["id"] and r["measured_s"] != ""]
            main = max({r["group"] for r in rows}, key=lambda g: min(r["measured_s"] for r in rows if r["group"] == g))
            rows = [r for r in rows if r["group"] == main]
            bp = min(r["predicted_s"] for r in rows)
            bm = min(r["measured_s"] for r in rows)
            ax.scatter([r["predicted_s"] / bp for r in rows], [r["measured_s"] / bm for r in rows], s=8, alpha=0.6)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(cls)
        ax.set_xlabel("predicted / best predicted")
        ax.set_ylabel("measured / best measured")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "ranks.png"), dpi=110)
    fig, ax = plt.subplots(figsize=(6, 5))
    fams = sorted({r["family"] for r in trials_rows})
    for fam in fams:
        rows = [r for r in trials_rows if r["family"] == fam and r["measured_s"] != ""]
        ax.scatter([r["predicted_s"] * 1e6 for r in rows], [r["measured_s"] * 1e6 for r in rows], s=6, alpha=0.5, label=fam)
    lo, hi = 0.5, 1e5
    ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("predicted (us)")
    ax.set_ylabel("measured (us)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "predicted.png"), dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tessel", default=os.path.join(ROOT, "build", "default", "tessel"))
    ap.add_argument("--hw", default=os.path.join(ROOT, "hw_specs", "nvidia-h100-sxm.json"))
    ap.add_argument("--k", type=int, default=40, help="tilings measured per group (default 40)")
    ap.add_argument("--dtype", default="f16")
    ap.add_argument("--as-dtype", help="with --only: build the operators in this dtype instead (f32 for a CPU --hw)")
    ap.add_argument("--per-class", default=DEFAULT_PER_CLASS)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--models", nargs="*", help="model files to measure instead of op-sweep instances (e.g. the CPU "
                    "suite's workloads with a CPU --hw)")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    ap.add_argument("--timeout", type=int, default=540, help="seconds per instance")
    ap.add_argument("--time-budget", type=float, default=0, help="start no instance after this many seconds")
    ap.add_argument("--out", default="fidelity-out")
    ap.add_argument("--work", default="/tmp/tessel-fidelity")
    ap.add_argument("--render", metavar="DIR", help="only write the report of a finished run")
    args = ap.parse_args()
    if args.render:
        render(args)
        return
    os.makedirs(args.out, exist_ok=True)
    measure(args)
    args.render = args.out
    render(args)


if __name__ == "__main__":
    main()
