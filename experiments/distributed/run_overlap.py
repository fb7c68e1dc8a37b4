#!/usr/bin/env python3
"""Ring-shift overlap (Mercury's shift) against the all-gather it replaces, on two GPUs, across M.

Two workloads, f16, with the input given sharded by rows (sequence parallelism) and pinned to
Megatron's column split, so the plan all-gathers the input before the first product:
  ag_gemm  y = x w, x [M, 4096] by rows, w [4096, 11008] by columns, y left by columns: the
           all-gather-GEMM of LLaMA-7B's gate projection
  mlp      the LLaMA-7B MLP (run_tp.py's) in Megatron's sequence-parallel plan: x by rows, gate and
           up by columns, down by rows, y by rows (x's all-gather, then a reduce-scatter)
For each M, `tessel run --device cuda --mesh 2` with `--overlap off` (all-gather, then the node) and
`--overlap on` (the node in two pieces, the second block shifted around the ring on a side stream
while the first piece runs), interleaved over --rounds, each checked against the interpreter
(--check, sampled for large M) before it is timed: GPU time, CUDA-graph replays between events,
L2 warm, the slower device's median. `tessel shard --overlap auto` gives the cost model's pick,
and `--overlap off/on` its two predictions.

    python3 experiments/distributed/run_overlap.py --tessel dist/tessel/bin/tessel --out DIR \\
        --hw2 hw_specs/nvidia-h200-x2.json [--m 1024 2048 4096 8192 16384] [--mlp-m 2048 8192]

Writes DIR/overlap.csv, DIR/README.md (table, the machine, every command's output) and
DIR/overlap.png (measured speedup of on over off against M, the model's picks marked).
"""

import argparse
import csv
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_tp import mlp_model, tessel_time  # noqa: E402

HIDDEN, FFN = 4096, 11008
PINS = {"ag_gemm": "x=S0 w=S1 y=S1", "mlp": "x=S0 gate_w=S1 up_w=S1 down_w=S0 y=S0"}
TIE = 0.03  # speedups within 3% of 1 count as a tie: either pick is right


def ag_gemm_model(m):
    return {"format": "tessel-model", "version": 1, "name": "ag_gemm_m%d" % m, "opset": 23,
            "inputs": [{"name": "x", "dtype": "f16", "shape": [m, HIDDEN]}], "outputs": ["y"],
            "weights": [{"name": "w", "dtype": "f16", "shape": [HIDDEN, FFN],
                         "init": {"dist": "normal", "mean": 0, "std": 0.02, "seed": 2}}],
            "ops": [{"name": "proj", "op": "MatMul", "inputs": ["x", "w"], "outputs": ["y"]}]}


def run(cmd, timeout=300):
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout + p.stderr, time.time() - t0
    except subprocess.TimeoutExpired:
        return 124, "timed out after %d s" % timeout, time.time() - t0


def predicted(text):
    m = re.search(r"predicted ([0-9.]+) ms", text)
    return float(m.group(1)) if m else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tessel", default=os.path.join(ROOT, "build", "default", "tessel"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--m", type=int, nargs="*", default=[1024, 2048, 4096, 8192, 16384])
    ap.add_argument("--mlp-m", type=int, nargs="*", default=[2048, 8192])
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--hw2", default=os.path.join(ROOT, "hw_specs", "nvidia-h200-x2.json"))
    ap.add_argument("--time-budget", type=float, default=1e9, help="seconds; later points are skipped past it")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    start = time.time()
    try:
        import torch
        machine = "%s x %d" % (torch.cuda.get_device_name(0), torch.cuda.device_count())
    except Exception:  # noqa: BLE001
        machine = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip().replace("\n", ", ")
    rows, logs = [], []
    points = [("ag_gemm", m) for m in a.m] + [("mlp", m) for m in a.mlp_m]
    for work, m in points:
        if time.time() - start > a.time_budget:
            print("skipped (time budget):", work, m, flush=True)
            continue
        path = os.path.join(a.out, "%s_m%d.json" % (work, m))
        json.dump(ag_gemm_model(m) if work == "ag_gemm" else mlp_model(m), open(path, "w"), indent=1)
        row = {"workload": work, "M": m}
        base = ["--hw", a.hw2, "--mesh", "2", "--shard", PINS[work]]
        for mode in ("off", "on", "auto"):
            rc, text, _ = run([a.tessel, "shard", path, "--no-schedule", "--overlap", mode] + base)
            row["predicted_%s_ms" % mode] = predicted(text) if rc == 0 else None
            if mode == "auto":
                row["model_pick"] = "on" if "shift(" in text else "off"
            logs.append("## %s M=%d shard --overlap %s (exit %d)\n```\n%s\n```\n" % (work, m, mode, rc, text[-2500:]))
        for r in range(a.rounds):
            for mode in ("off", "on"):
                cmd = [a.tessel, "run", path, "--device", "cuda", "--time", str(a.repeats), "--overlap", mode] + base
                if r == 0:
                    cmd.append("--check")
                rc, text, wall = run(cmd)
                t = tessel_time(text) if rc == 0 else None
                row["%s_ms_r%d" % (mode, r)] = t
                row["%s_ok" % mode] = row.get("%s_ok" % mode, True) and rc == 0
                logs.append("## %s M=%d run --overlap %s round %d (exit %d, %.0f s)\n```\n%s\n```\n" % (work, m, mode, r, rc, wall, text[-2500:]))
                print(work, m, mode, r, t, "ok" if rc == 0 else "FAILED", flush=True)
        for mode in ("off", "on"):
            ts = [row.get("%s_ms_r%d" % (mode, r)) for r in range(a.rounds)]
            ts = [t for t in ts if t]
            row["%s_ms" % mode] = sum(ts) / len(ts) if ts else None
        if row["off_ms"] and row["on_ms"]:
            s = row["off_ms"] / row["on_ms"]
            row["speedup_on_over_off"] = round(s, 4)
            faster = "on" if s > 1 + TIE else "off" if s < 1 - TIE else "tie"
            row["faster"] = faster
            row["pick_right"] = faster == "tie" or faster == row.get("model_pick")
            if row.get("predicted_off_ms") and row.get("predicted_on_ms"):
                row["predicted_speedup"] = round(row["predicted_off_ms"] / row["predicted_on_ms"], 4)
        rows.append(row)
    keys = []
    for r in rows:
        for k in r:
            if k not in keys:
                keys.append(k)
    with open(os.path.join(a.out, "overlap.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    judged = [r for r in rows if "pick_right" in r]
    with open(os.path.join(a.out, "README.md"), "w") as f:
        f.write("# Ring-shift overlap on 2 GPUs\n\nMachine: %s. Command: `%s`.\n\n" % (machine, " ".join(sys.argv)))
        f.write("GPU time, CUDA-graph replays between events, L2 warm, the slower device's median of %d, "
                "mean over %d interleaved rounds; every run checked against the interpreter in round 0.\n\n" % (a.repeats, a.rounds))
        f.write("| workload | M | off ms | on ms | on / off speedup | predicted off ms | predicted on ms | predicted speedup | model picks | right |\n")
        f.write("|---|---|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            f.write("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n" % (
                r["workload"], r["M"], r.get("off_ms"), r.get("on_ms"), r.get("speedup_on_over_off"), r.get("predicted_off_ms"),
                r.get("predicted_on_ms"), r.get("predicted_speedup"), r.get("model_pick"), r.get("pick_right")))
        f.write("\nThe model picked the faster (or a tie within %d%%) at %d of %d points.\n\n" % (
            TIE * 100, sum(1 for r in judged if r["pick_right"]), len(judged)))
        f.write("\n".join(logs))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 4))
        for work, marker in (("ag_gemm", "o"), ("mlp", "s")):
            pts = [r for r in rows if r["workload"] == work and r.get("speedup_on_over_off")]
            if not pts:
                continue
            ax.plot([r["M"] for r in pts], [r["speedup_on_over_off"] for r in pts], marker=marker, label="%s measured" % work)
            ax.plot([r["M"] for r in pts], [r.get("predicted_speedup") or float("nan") for r in pts], marker=marker,
                    linestyle="--", alpha=0.6, label="%s predicted" % work)
            for r in pts:
                ax.annotate("pick " + r.get("model_pick", "?"), (r["M"], r["speedup_on_over_off"]), fontsize=7,
                            textcoords="offset points", xytext=(3, 5))
        ax.axhline(1.0, color="gray", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("M (tokens)")
        ax.set_ylabel("overlap on / off (speedup)")
        ax.set_title("Ring-shift overlap, 2 GPUs (%s)" % machine.split(" x ")[0], fontsize=9)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(a.out, "overlap.png"), dpi=120)
    except Exception as e:  # noqa: BLE001
        print("no plot:", e)
    print(open(os.path.join(a.out, "README.md")).read()[:2500])


if __name__ == "__main__":
    main()
