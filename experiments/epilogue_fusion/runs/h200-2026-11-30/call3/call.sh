#!/usr/bin/env bash
# Session 15, call 3 (1x H200): the final build (rcp.approx sigmoid, epilogue instructions priced): the GPU suite, then CUDA test cases the change touches.
set -u
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
D=$OUT/m3; mkdir -p $D; cp tmp_diag/callm3.sh $D/call.sh
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv > $D/nvidia-smi.csv
timeout 330 python3 experiments/gpu_suite/run_suite.py --tessel dist/tessel/bin/tessel --no-autotune --out $D/suite --work /tmp/sw > $D/suite.log 2>&1
echo "suite rc=$? t=$SECONDS" >> $D/rc.txt
tar -C $OUT -czf $OUT/m3.tgz m3
timeout 150 dist/tessel/bin/tessel_tests -tc="cuda vector*,cuda families*,cuda mma run*" > $D/tests.log 2>&1; echo "tests rc=$? t=$SECONDS" >> $D/rc.txt
grep -E "^\[doctest\] (test cases|assertions|Status)" $D/tests.log >> $D/rc.txt
cat $D/rc.txt; tail -25 $D/suite.log
tar -C $OUT -czf $OUT/m3.tgz m3; ls -la $OUT
