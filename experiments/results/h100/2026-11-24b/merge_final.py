#!/usr/bin/env python3
"""The table of this folder: the 2026-11-24 final table (runs/previous_final.json, a copy of
../2026-11-24/runs/final.json) with the rows of the workloads that have a contraction the wgmma path
or the batch folding changed replaced by this folder's runs on the final code: runs/h (gemm_4096,
gemm_llm_up, bert_layer) and runs/i (gemm_decode, bert_ffn1, rmsnorm_gemm, llama_mlp,
llama_block). The other six workloads (layernorm, softmax, attention, eltwise_chain,
conv_bn_relu, resnet_block) compile to the same kernels as then (no plain product of at least
128 x 128 with B shared over its batch: attention's products are batched on both sides, the convs
are implicit GEMMs), so their earlier rows stand; each row's Tessel and torch numbers are from one run.

  /usr/bin/python3 merge_final.py && /usr/bin/python3 ../../../gpu_suite/run_suite.py --render runs/final.json --out .
"""
import json
import os

here = os.path.dirname(os.path.abspath(__file__))
order = ["previous_final.json", "h_suite.json", "i_suite.json"]
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
