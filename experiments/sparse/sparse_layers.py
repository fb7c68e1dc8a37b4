#!/usr/bin/env python3
"""Whole sparse layers on the GPU: a BERT-base layer and a LLaMA-7B MLP (f16, M = 4096 tokens) whose
linear weights carry a block-sparsity attribute (or, with --pattern nm, a 2:4 one along K), compiled by Tessel three ways in one run on one
device -- every kernel dense (`--sparse-kernels dense`, on the same pruned weights), as the cost model
chooses (the default), every sparse weight's contraction block-sparse (`--sparse-kernels
block_sparse`) -- each checked against the interpreter, then timed (`tessel run --time N`: GPU time,
CUDA-graph replays between events, L2 warm unless --cold-l2).

    python3 experiments/sparse/sparse_layers.py --out DIR [--density 0.1] [--block 64] [--pattern block|nm] [--tessel PATH]

Writes DIR/layers.json and DIR/layers.md. The issue's target: the sparse BERT-base layer (FFN
weights at 90% block sparsity) >= 1.5x the dense Tessel layer. PyTorch baselines for whole layers
are not run here (run_sparse.py has them per GEMM).
"""

import argparse
import copy
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODES = ("dense", "cost", "block_sparse")


def sparsity(pattern, density, block):
    """The weights' sparsity attribute: blocks at `density`, or 2:4 along K (axis 0 of a MatMul
    weight [K, N]; Tessel prunes the random weights to it)."""
    if pattern == "nm":
        return {"pattern": "nm", "n": 2, "m": 4, "axis": 0}
    return {"pattern": "block", "block": [block, block], "density": density}


def bert_layer(batch, density, block, which, pattern="block"):
    """experiments/models/bert_base_layer.json at `batch` sequences of 128 in f16, the weights in
    `which` sparse."""
    d = json.load(open(os.path.join(ROOT, "experiments", "models", "bert_base_layer.json")))
    d["name"] = "bert_base_layer_sparse"
    for v in d["inputs"]:
        v["dtype"], v["shape"][0] = "f16", batch
    for w in d["weights"]:
        if w["dtype"] == "f32":
            w["dtype"] = "f16"
        if w["name"] in ("shape_heads", "shape_hidden"):
            w["data"][0] = batch
        if w["name"] in which:
            w["sparsity"] = sparsity(pattern, density, block)
    return d


def llama_mlp(tokens, density, block, pattern="block"):
    """x + down(silu(norm(x) gate) * norm(x) up), LLaMA-7B sizes, every projection sparse."""
    def weight(name, shape, seed, sparse=True):
        w = {"name": name, "dtype": "f16", "shape": shape, "init": {"dist": "normal", "mean": 0, "std": 0.02, "seed": seed}}
        if sparse:
            w["sparsity"] = sparsity(pattern, density, block)
        return w
    return {
        "format": "tessel-model", "version": 1, "name": "llama_mlp_sparse", "opset": 23,
        "inputs": [{"name": "x", "dtype": "f16", "shape": [tokens, 4096]}], "outputs": ["y"],
        "weights": [{"name": "norm_scale", "dtype": "f16", "shape": [4096], "init": {"dist": "normal", "mean": 1, "std": 0.02, "seed": 1}},
                    weight("gate_w", [4096, 11008], 2), weight("up_w", [4096, 11008], 3), weight("down_w", [11008, 4096], 4)],
        "ops": [
            {"name": "norm", "op": "RMSNormalization", "inputs": ["x", "norm_scale"], "outputs": ["h"]},
            {"name": "gate", "op": "MatMul", "inputs": ["h", "gate_w"], "outputs": ["g"]},
            {"name": "sig", "op": "Sigmoid", "inputs": ["g"], "outputs": ["gs"]},
            {"name": "silu", "op": "Mul", "inputs": ["g", "gs"], "outputs": ["s"]},
            {"name": "up", "op": "MatMul", "inputs": ["h", "up_w"], "outputs": ["u"]},
            {"name": "swiglu", "op": "Mul", "inputs": ["s", "u"], "outputs": ["a"]},
            {"name": "down", "op": "MatMul", "inputs": ["a", "down_w"], "outputs": ["dn"]},
            {"name": "res", "op": "Add", "inputs": ["x", "dn"], "outputs": ["y"]},
        ],
    }


def run(cmd, timeout):
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout + p.stderr, time.time() - t0
    except subprocess.TimeoutExpired:
        return "timeout", "", time.time() - t0


def measure(args, name, path, mode, work):
    cache = os.path.join(work, "cache", name + "." + mode)
    base = [args.tessel, "run", path, "--device", "cuda", "--hw", args.hw, "--cache", cache, "--sparse-kernels", mode]
    row = {"model": name, "mode": mode}
    check = os.path.join(work, name + "." + mode + ".check.json")
    rc, text, wall = run(base + ["--check", "--report", check], args.timeout)
    row["check_wall_s"] = round(wall, 1)
    rep = json.load(open(check)) if os.path.exists(check) else {}
    row["correct"] = rc == 0 and bool(rep.get("outputs")) and all(o.get("ok") for o in rep["outputs"])
    row["predicted_ms"] = 1e3 * rep["predicted_s"] if rep.get("predicted_s") else None
    if not row["correct"]:
        row["log"] = text[-1500:]
        return row
    timed = os.path.join(work, name + "." + mode + ".time.json")
    rc, text, _ = run(base + ["--time", str(args.repeats), "--report", timed] + (["--cold-l2"] if args.cold_l2 else []), args.timeout)
    rep = json.load(open(timed)) if os.path.exists(timed) else {}
    row["ms"] = 1e3 * rep["median_s"] if rep.get("median_s") else None
    rc, text, _ = run([args.tessel, "explain", path, "--hw", args.hw, "--sparse-kernels", mode], args.timeout)
    row["kinds"] = re.findall(r"^\s*kind\s+(.*)$", text, re.M)
    row["kernels"] = len(re.findall(r"^kernel \d+", text, re.M))
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tessel", default=os.path.join(ROOT, "dist", "tessel", "bin", "tessel"))
    p.add_argument("--hw", default=os.path.join(ROOT, "hw_specs", "nvidia-h100-sxm.json"))
    p.add_argument("--out", default=os.environ.get("OUT", "sparse-layers-out"))
    p.add_argument("--work", default="/tmp/tessel-sparse-layers")
    p.add_argument("--density", type=float, default=0.1)
    p.add_argument("--block", type=int, default=64)
    p.add_argument("--pattern", choices=["block", "nm"], default="block", help="block: --block blocks at --density; nm: 2:4 along K")
    p.add_argument("--tokens", type=int, default=4096, help="M: tokens per run (BERT: sequences of 128)")
    p.add_argument("--repeats", type=int, default=50)
    p.add_argument("--timeout", type=int, default=300)
    p.add_argument("--cold-l2", action="store_true")
    p.add_argument("--models", nargs="+", default=["bert_ffn", "bert_all", "llama_mlp"])
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(os.path.join(args.work, "cache"), exist_ok=True)
    linear = ["l0_attn_q_w", "l0_attn_k_w", "l0_attn_v_w", "l0_attn_o_w", "l0_ffn1_w", "l0_ffn2_w"]
    models = {
        "bert_ffn": bert_layer(args.tokens // 128, args.density, args.block, ["l0_ffn1_w", "l0_ffn2_w"], args.pattern),
        "bert_all": bert_layer(args.tokens // 128, args.density, args.block, linear, args.pattern),
        "llama_mlp": llama_mlp(args.tokens, args.density, args.block, args.pattern),
    }
    rows = []
    for name in args.models:
        path = os.path.join(args.work, name + ".json")
        json.dump(models[name], open(path, "w"))
        for mode in MODES:
            row = measure(args, name, path, mode, args.work)
            rows.append(row)
            print("%-10s %-13s correct=%s ms=%s predicted=%s" % (name, mode, row["correct"], row.get("ms"), row.get("predicted_ms")),
                  file=sys.stderr)
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    meta = {"gpu": gpu, "date": time.strftime("%Y-%m-%d", time.gmtime()), "pattern": args.pattern, "density": args.density, "block": args.block,
            "tokens": args.tokens, "repeats": args.repeats, "l2": "cold" if args.cold_l2 else "warm", "argv": sys.argv[1:]}
    json.dump({"meta": meta, "rows": rows}, open(os.path.join(args.out, "layers.json"), "w"), indent=1)
    what = "2:4 along K" if args.pattern == "nm" else "%dx%d blocks at density %g" % (args.block, args.block, args.density)
    lines = ["# Sparse layers: %s, %s, f16, M = %d tokens, %s, L2 %s" % (gpu, meta["date"], args.tokens, what, meta["l2"]), "",
             "Each model compiled three ways on the same pruned weights, checked against the interpreter, timed "
             "(GPU time, CUDA-graph replays, median of %d)." % args.repeats, "",
             "| model | dense ms | cost model's pick ms | all sparse ms | pick vs dense | kinds picked |", "|---|---|---|---|---|---|"]
    for name in args.models:
        r = {x["mode"]: x for x in rows if x["model"] == name}
        def ms(mode):
            return "%.4f" % r[mode]["ms"] if r.get(mode, {}).get("ms") else ("NOT CORRECT" if not r.get(mode, {}).get("correct") else "-")
        speed = "%.2fx" % (r["dense"]["ms"] / r["cost"]["ms"]) if r["dense"].get("ms") and r["cost"].get("ms") else "-"
        kinds = "; ".join(k.split(":")[0] for k in r["cost"].get("kinds", []))
        lines.append("| %s | %s | %s | %s | %s | %s |" % (name, ms("dense"), ms("cost"), ms("block_sparse"), speed, kinds))
    lines += ["", "Target: the sparse BERT-base layer (FFN weights at 90% block sparsity, `bert_ffn`) >= 1.5x the dense "
              "Tessel layer."]
    open(os.path.join(args.out, "layers.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
