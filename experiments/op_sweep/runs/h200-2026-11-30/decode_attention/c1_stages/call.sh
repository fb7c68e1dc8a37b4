#!/usr/bin/env bash
# Session 13, call 1 (2x H200): flash decode rings. GPU 0: the op sweep's 72 attention instances
# with deepen_chunks (H100 spec, as every sweep), then the GPU tests of the flash and mma kernels.
# GPU 1: forced ring depths of 12 one-warp-kernel instances, each checked then timed.
set -u
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD
D=$OUT/f1; mkdir -p $D; cp tmp_diag/callf1.sh $D/call.sh
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv > $D/nvidia-smi.csv
( export CUDA_VISIBLE_DEVICES=0 TESSEL_CACHE_DIR=/tmp/tc0
  timeout 300 python3 experiments/op_sweep/run_sweep.py --tessel dist/tessel/bin/tessel \
    --hw hw_specs/nvidia-h100-sxm.json --out $D/sweep --work /tmp/w0 --only $(cat tmp_diag/only_attention.txt) \
    --jobs 14 --torch-workers 8 --time-budget 260 > $D/sweep.log 2>&1; echo "sweep rc=$? t=$SECONDS" >> $D/rc.txt
  timeout $((570 - SECONDS)) dist/tessel/bin/tessel_tests -tc="cuda flash run*,cuda mma run*,cuda families*" > $D/tests.log 2>&1; echo "tests rc=$? t=$SECONDS" >> $D/rc.txt
  grep -E "^\[doctest\] (test cases|assertions|Status)" $D/tests.log >> $D/rc.txt ) &
( export CUDA_VISIBLE_DEVICES=1 TESSEL_CACHE_DIR=/tmp/tc1
  for m in tmp_diag/fvar/*.f16.json tmp_diag/fvar/*.bf16.json; do
    i=$(basename $m .json)
    for s in tmp_diag/fvar/$i.s*.sched.json; do
      v=$(basename $s .sched.json); v=${v#$i.}
      [[ $SECONDS -gt 540 ]] && break 2
      t=$(timeout 60 dist/tessel/bin/tessel run $m --schedule $s --device cuda --hw hw_specs/nvidia-h100-sxm.json --time 30 --check 2>&1 | tee -a $D/grid.log | grep -o "median [0-9.]* ms\|matches\|MISMATCH\|rror.*" | tr '\n' ' ')
      echo "$i $v $t" >> $D/grid.txt
    done
  done
  echo "grid t=$SECONDS" >> $D/rc.txt ) &
wait
cat $D/rc.txt; tar -C $OUT -czf $OUT/f1.tgz f1 && rm -rf $D; ls -la $OUT
