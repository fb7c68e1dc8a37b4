#!/usr/bin/env bash
# GPU call 2 (issue 23): the row and pool classes again after short rows take one warp (A/B
# against call 1 on the same warm machine), then every CUDA test case and bundled model
# (scripts/gpu_check) on this build.
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
D=/tmp/c2; rm -rf $D; mkdir -p $D
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $D/nvidia-smi.csv
OUT=$D TESSEL_SWEEP_ARGS="--classes row pool --time-budget 290" TESSEL_SWEEP_TIMEOUT=320 scripts/device_run sweep > $D/sweep.log 2>&1
echo "sweep rc $?"
OUT=$D scripts/device_run check > $D/check_stage.log 2>&1
echo "check rc $?"
tar -C /tmp -czf $OUT/c2.tgz c2
tail -4 $D/check_stage.log; cat $D/summary.txt
grep -E "test cases|assertions|FAIL|ERROR" $D/check.log | head -20
