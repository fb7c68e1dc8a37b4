"""Compile a model for this machine's CPU, run it, check it against the reference interpreter,
time it, and print why each kernel looks the way it does.

    python python/examples/compile_and_check.py [MODEL]     (default: the bundled BERT-base layer)
"""
import pathlib
import sys

import numpy as np

import tessel

root = pathlib.Path(__file__).resolve().parents[2]
model = sys.argv[1] if len(sys.argv) > 1 else str(root / "experiments/models/bert_base_layer.json")

m = tessel.compile(model, device="cpu")  # this host's CPU, probed; the default policy (welder)
print(m)
x = [np.random.default_rng(0).standard_normal(i["shape"]).astype(np.float32) for i in m.inputs]
y = m(*x)                                   # numpy in, numpy out
expected = m.reference(*x)[0]               # the interpreter, fp64 accumulation
print("output", m.outputs[0]["name"], y.shape, "max |difference| vs the interpreter:", float(np.abs(y - expected).max()))
for r in m.check(*x):                       # the same comparison with the dtype's tolerance
    print("check", r["output"], "ok" if r["ok"] else "MISMATCH", "relative L2 error", r["rel_l2_error"])
t = m.time(*x, repeats=5)
print(f"median {t['median_s'] * 1e3:.3f} ms over {len(t['times_s'])} runs; predicted {m.report['predicted_s'] * 1e3:.3f} ms")
print(m.explain().splitlines()[0])
