#!/usr/bin/env bash
# Session 17, call 1 (1x H200): 2:4 sparse weights on the sparse tensor cores (mma.sp).
# 1. a probe of mma.sp's metadata layout (standalone nvcc); 2. the GPU tests of the 2:4 kernels
# against the interpreter; 3. run_sparse.py --nm-only on LLaMA-7B and BERT-base linear layers:
# Tessel dense, Tessel's 2:4 pick and the forced 2:4 kernel, checked, against cuBLAS and
# PyTorch's 2:4 (cuSPARSELt, CUTLASS), GPU time on both sides.
set -u
D=$OUT/q1; mkdir -p $D; cp tmp_diag/nm/call1.sh $D/call.sh
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv > $D/nvidia-smi.csv
/usr/local/cuda/bin/nvcc -arch=sm_90a -o /tmp/probe tmp_diag/nm/probe.cu > $D/probe_build.log 2>&1 && /tmp/probe > $D/probe.txt 2>&1
cat $D/probe.txt
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD
TESSEL_CACHE_DIR=/tmp/tc timeout 200 dist/tessel/bin/tessel_tests -tc="cuda nm sparse*" > $D/tests.log 2>&1
echo "tests rc=$? t=$SECONDS" | tee -a $D/rc.txt
grep -E "^\[doctest\] (test cases|assertions|Status)|ERROR|FATAL|error" $D/tests.log | head -30 | tee -a $D/rc.txt
tar -C $OUT -czf $OUT/q1.tgz q1
timeout $((570 - SECONDS)) python3 experiments/sparse/run_sparse.py --nm-only --weight-layout nk \
  --only-shapes llama7b.4096x4096 llama7b.4096x11008 llama7b.11008x4096 bert.768x3072 \
  --hw hw_specs/nvidia-h200.json --out $D/sparse --time-budget $((540 - SECONDS)) --jobs 6 --interp-threads 4 > $D/sparse.log 2>&1
echo "sparse rc=$? t=$SECONDS" | tee -a $D/rc.txt
tail -30 $D/sparse/report.md 2>/dev/null | tee -a $D/rc.txt
tar -C $OUT -czf $OUT/q1.tgz q1
