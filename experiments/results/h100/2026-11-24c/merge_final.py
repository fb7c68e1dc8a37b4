#!/usr/bin/env python3
"""The table of this folder: the 2026-11-24b final table (runs/previous_final.json, a copy of
../2026-11-24b/runs/final.json) with the rows of the three workloads that contain attention
replaced by this folder's run on the streamed attention kernel: runs/j_suite.json (attention,
bert_layer, llama_block). The other eleven workloads have no attention pattern, so they compile
to the same kernels as in 2026-11-24b and their rows stand; each row's Tessel and torch numbers
are from one run.

  /usr/bin/python3 merge_final.py && /usr/bin/python3 ../../../gpu_suite/run_suite.py --render runs/final.json --out .
"""
import json
import os

here = os.path.dirname(os.path.abspath(__file__))
order = ["previous_final.json", "j_suite.json"]
merged, rows = None, {}
for name in order:
    d = json.load(open(os.path.join(here, "runs", name)))
    if merged is None:
        merged = {k: v for k, v in d.items() if k != "workloads"}
    for r in d["workloads"]:
        rows[r["id"]] = r
suite = ["gemm_4096", "gemm_llm_up", "gemm_decode", "bert_ffn1", "layernorm", "softmax", "rmsnorm_gemm", "llama_mlp",
         "attention", "eltwise_chain", "conv_bn_relu", "bert_layer", "resnet_block", "llama_block"]
merged["workloads"] = [rows[w] for w in suite]
with open(os.path.join(here, "runs", "final.json"), "w") as f:
    json.dump(merged, f, indent=1)
print("runs/final.json: %d workloads" % len(merged["workloads"]))
