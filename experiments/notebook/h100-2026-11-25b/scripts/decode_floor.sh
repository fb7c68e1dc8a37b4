#!/usr/bin/env bash
# SCRATCH: what a read of the decode weight costs in the suite's timing method.
set -u
cd "$(dirname "$0")/.."
[[ -x dist/tessel/bin/tessel ]] || tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
T=dist/tessel/bin/tessel; S=hw_specs/nvidia-h100-sxm.json; M=scratch/decode.json
which python3; python3 -c "import torch; print(torch.__version__)"
python3 - <<'PY'
import torch, statistics
def t(fn, rep=300):
    for _ in range(20): fn()
    torch.cuda.synchronize(); ts=[]
    for _ in range(rep):
        s,e=torch.cuda.Event(enable_timing=True),torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); e.synchronize(); ts.append(s.elapsed_time(e))
    return statistics.median(ts)
W=torch.randn(4096,4096,device='cuda',dtype=torch.float16); x=torch.randn(16,4096,device='cuda',dtype=torch.float16)
o=torch.empty(4096,device='cuda',dtype=torch.float16)
for r in range(2):
  print("round", r)
  print("  W.sum(0) (reads W once) ms %.4f" % t(lambda: torch.sum(W,0,out=o)))
  print("  W.amax(0) ms %.4f" % t(lambda: torch.amax(W,0)))
  print("  W.sum() ms %.4f" % t(lambda: W.sum()))
  print("  x@W (cuBLAS) ms %.4f" % t(lambda: x@W))
  print("  empty kernel (o.zero_()) ms %.4f" % t(lambda: o.zero_()))
  g=torch.cuda.CUDAGraph()
  with torch.cuda.graph(g): torch.sum(W,0,out=o)
  print("  W.sum(0) as a CUDA graph ms %.4f" % t(lambda: g.replay()))
big=torch.empty(1<<28, device='cuda', dtype=torch.float16).normal_(); ob=torch.empty((),device='cuda',dtype=torch.float16)
print("512 MiB sum: GB/s %.0f" % ((1<<29)/t(lambda: torch.sum(big,out=ob),50)/1e6))
PY
for r in 1 2; do $T run $M --device cuda --hw $S --time 300 2>&1 | grep timed; TESSEL_CUDA_GRAPH=1 $T run $M --device cuda --hw $S --time 300 2>&1 | grep timed; done
ncu --cache-control none --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum $T run $M --device cuda --hw $S --time 5 2>&1 | grep -E "gpu__time|dram__" | tail -6
