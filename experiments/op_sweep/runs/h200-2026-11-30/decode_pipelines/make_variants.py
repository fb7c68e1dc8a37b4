#!/usr/bin/env python3
"""Writes what c3/call.sh and c4/call.sh read from tmp_diag/ (run from the repository root, with
the build that ran them): the five decode GEMMs of the op sweep as models (instances.py), their
schedules for the H100 spec, and one copy per forced variant with every mma group's K step, stages
and split set (c3's grid: K 32 x 4 stages was 3a71731's plan)."""
import copy, json, os, subprocess

INSTANCES = ["gemm.llama70b.down.m1.f16", "gemm.llama70b.o.m16.bf16", "gemm.llama70b.qkv.m16.f16",
             "gemm.llama7b.qkv.m1.f16", "gemm.llama7b.gate_up_swiglu.m16.f16"]
VARIANTS = {"k32s4": (32, 4, 1), "k64s4": (64, 4, 1), "k64s5": (64, 5, 1), "k64s6": (64, 6, 1),
            "k64s8": (64, 8, 1), "k32s8": (32, 8, 1), "sp2k64s8": (64, 8, 2)}
out = "tmp_diag/var"
os.makedirs(out, exist_ok=True)
subprocess.run(["python3", "experiments/op_sweep/instances.py", "--out", out, "--only", *INSTANCES], check=True)
for i in INSTANCES:
    sched = f"{out}/{i}.sched.json"
    subprocess.run(["build/default/tessel", "schedule", f"{out}/{i}.json", "--hw", "hw_specs/nvidia-h100-sxm.json", "-o", sched],
                   check=True, capture_output=True)
    base = json.load(open(sched))
    os.remove(sched)
    for name, (bk, stages, split) in VARIANTS.items():
        d = copy.deepcopy(base)
        for g in d["groups"]:
            if g["kernel"]["family"] == "mma":
                g["kernel"]["params"].update(block_k=bk, stages=stages, split_k=split)
        json.dump(d, open(f"{out}/{i}.{name}.sched.json", "w"))
# c3 and c4's sweep list: the GEMMs of M <= 16 and the two DLRM GEMMs whose plan changed.
with open("tmp_diag/only3.txt", "w") as f:
    f.write(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "instances.txt")).read().strip())
