#!/usr/bin/python3
"""Runs an Exp over 2^20 f32 points spanning [-110, 95] (with NaN, +-inf, +-0 and the overflow and
subnormal edges) through two tessel binaries' CPU backends and says whether the outputs are the
same bits. Each run is also checked against the interpreter.

    experiments/cpu_suite/runs/cpu-2026-11-25g/exp_bits.py OLD/tessel NEW/tessel SPEC.json

Debian's python3 (numpy) is needed; the model is built with experiments/models/generate_models.py.
"""
import hashlib, os, subprocess, sys, tempfile

import numpy as np

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "experiments", "models"))
import generate_models as gm  # noqa: E402

old, new, spec = sys.argv[1:4]
work = tempfile.mkdtemp()
m = gm.Model("exp_bits", 17)
m.output(m.op("e", "Exp", [m.input("x", [1 << 20])]))
model = os.path.join(work, "exp_bits.json")
open(model, "w").write(gm.render(m.document()) + "\n")
os.makedirs(os.path.join(work, "in"))
x = np.linspace(-110, 95, 1 << 20, dtype=np.float64).astype(np.float32)
x[:8] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 88.72, 88.73, -87.3]
np.save(os.path.join(work, "in", "input_0.npy"), x)
digests = []
for i, binary in enumerate((old, new)):
    out = os.path.join(work, "out%d" % i)
    p = subprocess.run([binary, "run", model, "--device", "cpu", "--hw", spec, "--inputs", os.path.join(work, "in"),
                        "--outputs", out, "--check"], capture_output=True, text=True)
    print(binary, "->", [line for line in (p.stdout + p.stderr).splitlines() if line.startswith("check")])
    if p.returncode != 0:
        sys.exit(p.stdout + p.stderr)
    digests.append(hashlib.sha256(open(os.path.join(out, "output_0.npy"), "rb").read()).hexdigest())
print("same bits" if digests[0] == digests[1] else "DIFFERENT bits", digests)
sys.exit(0 if digests[0] == digests[1] else 1)
