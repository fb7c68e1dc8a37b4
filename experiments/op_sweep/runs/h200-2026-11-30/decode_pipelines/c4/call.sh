#!/usr/bin/env bash
# Session 12, call 4 (2x H200): the final build (loaded latency 1.1 us). GPU 0: the op sweep's GEMMs
# of M <= 16 and the two DLRM GEMMs whose plan changed (H100 spec, as every sweep). GPU 1: the
# mma/families GPU tests, then six decode GEMMs scheduled for the H200 spec, checked and timed.
set -u
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD
D=$OUT/c4; mkdir -p $D; cp tmp_diag/calls4.sh $D/call.sh
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv > $D/nvidia-smi.csv
ONLY=$(cat tmp_diag/only3.txt)
( export CUDA_VISIBLE_DEVICES=0 TESSEL_CACHE_DIR=/tmp/tc0
  timeout 270 python3 experiments/op_sweep/run_sweep.py --tessel dist/tessel/bin/tessel \
    --hw hw_specs/nvidia-h100-sxm.json --out $D/sweep --work /tmp/w0 --only $ONLY \
    --jobs 14 --torch-workers 8 --time-budget 230 > $D/sweep.log 2>&1; echo "sweep rc=$? t=$SECONDS" >> $D/rc.txt ) &
( export CUDA_VISIBLE_DEVICES=1 TESSEL_CACHE_DIR=/tmp/tc1
  timeout 110 dist/tessel/bin/tessel_tests -tc="cuda mma run*,cuda families*" > $D/tests.log 2>&1; echo "tests rc=$? t=$SECONDS" >> $D/rc.txt
  grep -E "^\[doctest\] (test cases|assertions|Status)" $D/tests.log >> $D/rc.txt
  for i in gemm.llama70b.down.m1.f16 gemm.llama70b.o.m16.bf16 gemm.llama70b.qkv.m16.f16 gemm.llama7b.qkv.m1.f16 gemm.llama7b.gate_up_swiglu.m16.f16; do
    t=$(timeout 40 dist/tessel/bin/tessel run tmp_diag/var/$i.json --device cuda --hw hw_specs/nvidia-h200.json --time 30 --check 2>&1 | tee -a $D/h200spec.log | grep -o "median [0-9.]* ms\|matches\|MISMATCH\|rror.*" | tr '\n' ' ')
    echo "$i h200-spec $t" >> $D/h200spec.txt
  done; echo "h200 t=$SECONDS" >> $D/rc.txt ) &
wait
cat $D/rc.txt; tar -C $OUT -czf $OUT/c4.tgz c4 && rm -rf $D; ls -la $OUT
