#!/usr/bin/env python3
"""The final table of this folder: runs/a (7 workloads) and runs/b (7) on the code with implicit-GEMM
convolutions and ex2-based exp, then runs/c (eltwise_chain, bert_layer, resnet_block) and runs/e
(llama_mlp) and runs/f (llama_block) on the final code with the vector path, whose rows replace
the earlier ones.

  /usr/bin/python3 merge_final.py && /usr/bin/python3 ../../../gpu_suite/run_suite.py --render runs/final.json --out .
"""
import json
import os

here = os.path.dirname(os.path.abspath(__file__))
order = ["a_suite.json", "b_suite.json", "c_suite.json", "e_suite.json", "f_suite.json"]
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
