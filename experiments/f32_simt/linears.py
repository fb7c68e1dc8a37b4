#!/usr/bin/env python3
"""Writes f32 Linear layers as Tessel JSON models, for measuring the simt family's forms one group
at a time (`tessel run MODEL --tune K`: the tuner times each form of the group; run_f32.py times
whole torch modules instead).

    python3 experiments/f32_simt/linears.py DIR        # DIR/<name>.json for each shape below

Each is y = x W^T + b with W stored [N, K] (ONNX Gemm, transB = 1: how torch.nn.Linear exports),
or, for the names ending in _kn, y = x W + b with W stored [K, N] (MatMul, as the bundled models).
Python 3 standard library only.
"""
import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
import generate_models as gm  # noqa: E402

# name: (M, K, N)
SHAPES = {
    "bert_qkv_1024x768x768": (1024, 768, 768),
    "bert_ffn1_1024x768x3072": (1024, 768, 3072),
    "bert_ffn2_1024x3072x768": (1024, 3072, 768),
    "odd_1000x999x1001": (1000, 999, 1001),
    "decode_16x4096x4096": (16, 4096, 4096),
    "decode_1x4096x4096": (1, 4096, 4096),
    "square_4096": (4096, 4096, 4096),
    "bert_qkv_128x768x768_kn": (128, 768, 768),
}


def model(name, m_, k, n):
    m = gm.Model(name, 20, "f32")
    x = m.input("x", [m_, k])
    if name.endswith("_kn"):
        m.output(gm.linear(m, "fc", x, k, n, std=1.0 / math.sqrt(k)))
    else:
        w = m.normal("fc_w", [n, k], 1.0 / math.sqrt(k))
        m.output(m.op("fc", "Gemm", [x, w, m.normal("fc_b", [n], 0.02)], transB=1))
    return m.document()


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    for name, (m_, k, n) in SHAPES.items():
        with open(os.path.join(out, name + ".json"), "w") as f:
            json.dump(model(name, m_, k, n), f)
        print(os.path.join(out, name + ".json"))


if __name__ == "__main__":
    main()
