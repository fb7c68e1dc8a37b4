#!/usr/bin/env bash
# GPU call 1 (issue 23): streamed rows and per-row sinks in the row kernel -- the row kernel's
# GPU tests, the op sweep's row and pool classes, then the CUDA run tests (reductions now take
# the row kernel when their sink reduces one axis).
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
timeout 120 dist/tessel/bin/tessel_tests -tc="cuda row*" > $OUT/tests_row.log 2>&1; echo "row tests rc=$?"; tail -4 $OUT/tests_row.log
OUT=$OUT TESSEL_SWEEP_ARGS="--classes row pool --time-budget 290" TESSEL_SWEEP_TIMEOUT=320 scripts/device_run sweep > $OUT/sweep_stage.log 2>&1
echo "sweep rc=$?"; tail -3 $OUT/sweep_stage.log; cat $OUT/summary.txt
timeout 120 dist/tessel/bin/tessel_tests -tc="cuda run*,cuda vector*" > $OUT/tests_run.log 2>&1; echo "run tests rc=$?"; tail -4 $OUT/tests_run.log
grep -B2 -A8 "ERROR" $OUT/tests_run.log $OUT/tests_row.log | head -60
