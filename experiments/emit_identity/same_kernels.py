#!/usr/bin/env python3
"""Do two `tessel compile --emit cuda` directories hold the same kernels?

Compares, kernel by kernel in launch order, each kernel's launch shape and buffers (manifest.json,
less the name) and its source from the `extern "C" __global__` line on, with the kernel's name
(a hash of its whole source) replaced, plus the header comment that says what the group stages.
The device library pasted at the top of every source (kernels/cuda/device/) is left out, so a
change there does not make every kernel differ. Prints "identical" or "differs".

  same_kernels.py OLD_DIR NEW_DIR
"""
import json
import os
import sys


def kernels(directory):
    manifest = json.load(open(os.path.join(directory, "manifest.json")))
    out = []
    for k in manifest["kernels"]:
        source = open(os.path.join(directory, k["file"])).read()
        body = source[source.index('extern "C" __global__'):].replace(k["name"], "KERNEL")
        header = [line for line in source.splitlines()[:16] if line.startswith("//")]
        launch = {key: value for key, value in k.items() if key not in ("name", "file")}
        out.append((json.dumps(launch, sort_keys=True), body, header))
    rest = {key: value for key, value in manifest.items() if key != "kernels"}
    return out, rest


print("identical" if kernels(sys.argv[1]) == kernels(sys.argv[2]) else "differs")
