#!/usr/bin/env bash
# Session 12, call 3 (2x H200): decode GEMMs' pipelines. GPU 1: forced mma variants (K step, stages,
# split) of five decode GEMMs, each checked then timed. GPU 0: the op sweep's GEMMs of M <= 16 and
# the instances whose plan changed, with the new planner (deepened pipelines). One archive back.
set -u
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD
D=$OUT/c3; mkdir -p $D; cp tmp_diag/calls3.sh $D/call.sh
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv > $D/nvidia-smi.csv
ONLY=$(cat tmp_diag/only3.txt)
( export CUDA_VISIBLE_DEVICES=0 TESSEL_CACHE_DIR=/tmp/tc0
  timeout 400 python3 experiments/op_sweep/run_sweep.py --tessel dist/tessel/bin/tessel \
    --hw hw_specs/nvidia-h100-sxm.json --out $D/sweep --work /tmp/w0 --only $ONLY \
    --jobs 12 --torch-workers 6 --time-budget 330 > $D/sweep.log 2>&1; echo "sweep rc=$? t=$SECONDS" >> $D/rc.txt ) &
( export CUDA_VISIBLE_DEVICES=1 TESSEL_CACHE_DIR=/tmp/tc1
  for r in 0 1; do
  for m in tmp_diag/var/*.f16.json tmp_diag/var/*.bf16.json; do
    i=$(basename $m .json)
    for s in tmp_diag/var/$i.*.sched.json; do
      v=$(basename $s .sched.json); v=${v#$i.}
      C=""; [[ $r == 0 ]] && C="--check"
      t=$(timeout 60 dist/tessel/bin/tessel run $m --schedule $s --device cuda --hw hw_specs/nvidia-h100-sxm.json --time 30 $C 2>&1 | tee -a $D/grid.log | grep -o "median [0-9.]* ms\|matches\|MISMATCH\|rror.*" | tr '\n' ' ')
      echo "$i $v r$r $t" >> $D/grid.txt
    done
  done; done
  echo "grid t=$SECONDS" >> $D/rc.txt
  timeout 120 dist/tessel/bin/tessel_tests -tc="cuda mma run*,cuda families*" > $D/tests.log 2>&1; echo "tests rc=$?" >> $D/rc.txt
  grep -E "^\[doctest\] (test cases|assertions|Status)" $D/tests.log >> $D/rc.txt ) &
wait
cat $D/rc.txt; tar -C $OUT -czf $OUT/c3.tgz c3 && rm -rf $D; ls -la $OUT
