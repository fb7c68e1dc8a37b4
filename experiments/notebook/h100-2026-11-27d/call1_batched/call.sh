#!/bin/bash
# Call 1: the batched wgmma kernel -- GPU tests, the sweep's batched products and neighbours, and
# an ncu look at two GEMMs that trail cuBLAS (the GPT-2 vocabulary head, BERT QKV at m16384).
set -u
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
T=dist/tessel/bin/tessel
D=/tmp/c1; mkdir -p $D/m
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $D/nvidia-smi.csv
timeout 200 dist/tessel/bin/tessel_tests -tc="cuda mma*" > $D/tests.log 2>&1; echo "tests rc $?"; tail -4 $D/tests.log
grep -B3 -A12 "ERROR\|FAILED" $D/tests.log | head -60
IDS="gemm.llama7b.scores.s2048.f16 gemm.llama7b.scores.s2048.bf16 gemm.bert.scores.b32s128.f16 gemm.bert.scores.b32s128.bf16 gemm.bert.pv.b32s128.f16 gemm.dlrm.interaction.m2048.f16 gemm.bert.qkv.m16384.bf16 gemm.gpt2.lm_head.m8192.f16"
OUT=$D TESSEL_SWEEP_ARGS="--only $IDS --time-budget 180" TESSEL_SWEEP_TIMEOUT=220 scripts/device_run sweep > $D/sweep.log 2>&1
echo "sweep rc $?"; tail -12 $D/sweep.log
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
PIDS="gemm.gpt2.lm_head.m8192.f16 gemm.bert.qkv.m16384.bf16"
python3 experiments/op_sweep/instances.py --out $D/m --only $PIDS > /dev/null
SEC="--section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section LaunchStats --section SchedulerStats"
for id in $PIDS; do
  timeout 100 $NCU $SEC --target-processes all $T run $D/m/$id.json --device cuda --hw nvidia-h100-sxm > $D/$id.ncu.txt 2>&1
  echo "== $id"; grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|DRAM Throughput|Stall|Issued Warp" $D/$id.ncu.txt | head -20
done
rm -rf $D/m
tar -C /tmp -czf $OUT/c1.tgz c1
