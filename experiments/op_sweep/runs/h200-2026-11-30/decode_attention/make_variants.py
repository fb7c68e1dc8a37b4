#!/usr/bin/env python3
"""Writes what the calls read from tmp_diag/ (run from the repository root, with the build that ran
them): the op sweep's attention instances that run the mma.sync flash kernel with blocks of one
warp's 16 rows (decoding, a chunk of 16 queries, Whisper's cross attention), their welder schedules
for the H100 spec, and one copy per forced plan, the flash group recording only its choices:
  call 1 (--grid stages): ring depths 2-8 of the one-warp kernel (key_split 1, chunks of 64);
  call 2 (--grid split): key splits x chunk x stages (1 x 64 x 2: the plan before the key split)."""
import argparse, copy, json, os, subprocess

ap = argparse.ArgumentParser()
ap.add_argument("--grid", choices=["stages", "split"], default="split")
grid = ap.parse_args().grid

INSTANCES = [
    "attention.llama70b.decode.b1kv32768.f16", "attention.llama70b.decode.b1kv32768.bf16", "attention.llama70b.decode.b1kv4096.f16",
    "attention.llama70b.decode.b16kv8192.f16", "attention.llama7b.decode.b1kv4096.f16", "attention.llama7b.decode.b1kv32768.f16",
    "attention.llama7b.decode.b16kv4096.f16", "attention.llama7b.decode.b8kv16384.f16", "attention.llama7b.chunk.q16kv4096.f16",
    "attention.gemma7b.decode.b8kv8192.f16", "attention.gpt2.decode.b16kv1024.f16", "attention.whisper.dec_cross.b4.f16"]
# (key_split, chunk, stages)
PLANS = [(1, 64, s) for s in (2, 3, 4, 6, 8)] if grid == "stages" else [(1, 64, 2), (4, 32, 2), (2, 64, 2), (4, 32, 3), (2, 32, 2)]
out = "tmp_diag/fvar"
os.makedirs(out, exist_ok=True)
subprocess.run(["python3", "experiments/op_sweep/instances.py", "--out", out, "--only", *INSTANCES], check=True)
for i in INSTANCES:
    sched = f"{out}/{i}.sched.json"
    subprocess.run(["build/default/tessel", "schedule", f"{out}/{i}.json", "--hw", "hw_specs/nvidia-h100-sxm.json", "-o", sched],
                   check=True, capture_output=True)
    base = json.load(open(sched))
    os.remove(sched)
    for parts, chunk, stages in PLANS:
        d = copy.deepcopy(base)
        for g in d["groups"]:
            if g["kernel"]["family"] == "flash" and not g["kernel"]["params"].get("warpgroup"):
                g["kernel"]["params"] = (
                    {"stages": stages} if grid == "stages" else {"rows": 16, "key_split": parts, "chunk": chunk, "stages": stages}) | (
                    {k: v for k, v in g["kernel"]["params"].items() if k != "stages"} if grid == "stages" else {})
        name = f"s{stages}" if grid == "stages" else f"k{parts}c{chunk}s{stages}"
        json.dump(d, open(f"{out}/{i}.{name}.sched.json", "w"))
with open("tmp_diag/only_attention.txt", "w") as f:
    ids = subprocess.run(["python3", "experiments/op_sweep/instances.py", "--list"], check=True, capture_output=True, text=True).stdout
    f.write(" ".join(l.split()[0] for l in ids.splitlines() if l.startswith("attention.")))
