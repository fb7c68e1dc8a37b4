#!/bin/bash
# ncu profile of Tessel's wgmma GEMM kernels against cuBLAS on the same shapes.
set -u
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
T=dist/tessel/bin/tessel
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
D=/tmp/prof; mkdir -p $D/m
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv > $D/smi.txt
IDS="gemm.llama7b.qkv.m8192.f16 gemm.vit_l16.attn_out.m6304.f16 gemm.vit_l16.ffn_down.m197.f16 gemm.bert.attn_out.m16384.f16"
python3 experiments/op_sweep/instances.py --out $D/m --only $IDS
SEC="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats --section Occupancy --section SchedulerStats"
for id in $IDS; do
  $T compile $D/m/$id.json --device cuda --hw nvidia-h100-sxm --emit cuda -o $D/k_$id > $D/$id.compile.txt 2>&1
  timeout 200 $NCU $SEC --target-processes all $T run $D/m/$id.json --device cuda --hw nvidia-h100-sxm > $D/$id.tessel.ncu.txt 2>&1
done
cat > $D/cublas.py <<'PY'
import torch,sys
shapes={"llama":(8192,4096,12288),"vitl_out":(6304,1024,1024),"vitl_down":(197,4096,1024),"bert_out":(16384,768,768)}
for name,(m,k,n) in shapes.items():
    a=torch.randn(m,k,device="cuda",dtype=torch.float16); w=torch.randn(k,n,device="cuda",dtype=torch.float16)
    for _ in range(3): c=a@w
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push(name); c=a@w; torch.cuda.synchronize(); torch.cuda.nvtx.range_pop()
PY
timeout 200 $NCU $SEC --launch-skip 3 --launch-count 1 -k regex:'gemm|sm90|nvjet|cutlass' python3 $D/cublas.py > /dev/null 2>&1
timeout 300 $NCU $SEC --kernel-name regex:'gemm|sm90|nvjet|cutlass' --launch-skip-before-match 0 python3 $D/cublas.py > $D/cublas.ncu.txt 2>&1
# timings: tessel per-kernel time (graph replays) for each
for id in $IDS; do $T run $D/m/$id.json --device cuda --hw nvidia-h100-sxm --time 30 > $D/$id.time.txt 2>&1; done
tar -C /tmp -czf $OUT/prof.tgz prof
for id in $IDS; do echo "== $id"; grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|DRAM Throughput|Registers Per|Achieved Occupancy|Block Size|Grid Size" $D/$id.tessel.ncu.txt | head -12; tail -3 $D/$id.time.txt; done
echo "== cublas"; grep -E "^  [a-z_0-9]+.*\(|Duration|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|DRAM Throughput|Grid Size|Block Size" $D/cublas.ncu.txt | head -60
