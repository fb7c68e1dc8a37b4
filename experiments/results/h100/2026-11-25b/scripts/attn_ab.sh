#!/usr/bin/env bash
# SCRATCH: packed score pairs A/B, GPU tests, decode read baselines.
set -u
cd "$(dirname "$0")/.."
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
T=dist/tessel/bin/tessel; S=hw_specs/nvidia-h100-sxm.json; A=scratch/attn.json
nvidia-smi --query-gpu=name --format=csv,noheader
echo "== tests"; timeout 300 dist/tessel/bin/tessel_tests -tc='cuda flash*' 2>&1 | tail -4
echo "== check packed"; timeout 120 $T run $A --device cuda --hw $S --check 2>&1 | grep -i "check" | tail -2
for round in 1 2 3; do
  for v in pack nopack; do
    if [[ $v == nopack ]]; then export TESSEL_DEBUG_NOPACK=1; else unset TESSEL_DEBUG_NOPACK; fi
    r=$(timeout 60 $T run $A --device cuda --hw $S --time 30 2>&1 | grep "timed" | tail -1)
    echo "round $round $v | $r"
  done
done
unset TESSEL_DEBUG_NOPACK
echo "== read baselines (suite's cuda_time: event, call, event, sync; median of 200)"
/usr/bin/python3 - <<'PY'
import torch, statistics
def t(fn, rep=200):
    for _ in range(10): fn()
    torch.cuda.synchronize(); ts=[]
    for _ in range(rep):
        s,e=torch.cuda.Event(enable_timing=True),torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); e.synchronize(); ts.append(s.elapsed_time(e))
    return statistics.median(ts)
W=torch.randn(4096,4096,device='cuda',dtype=torch.float16); x=torch.randn(16,4096,device='cuda',dtype=torch.float16)
o=torch.empty(4096,device='cuda',dtype=torch.float16)
print("W.sum(0) ms", t(lambda: torch.sum(W,0,out=o)))
print("W.amax(0) ms", t(lambda: torch.amax(W,0)))
print("W.sum() ms", t(lambda: W.sum()))
print("x@W (cuBLAS) ms", t(lambda: x@W))
g=torch.cuda.CUDAGraph()
with torch.cuda.graph(g): torch.sum(W,0,out=o)
print("W.sum(0) graph ms", t(lambda: g.replay()))
big=torch.empty(1<<28, device='cuda', dtype=torch.float16); ob=torch.empty(1,device='cuda',dtype=torch.float16)
print("512MB sum GB/s", (1<<29)/t(lambda: torch.sum(big,out=ob),50)/1e6)
PY
