#!/bin/bash
set -u
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
D=/tmp/c5; mkdir -p $D
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $D/nvidia-smi.csv
OUT=$D TESSEL_SWEEP_ARGS="--classes gemm --time-budget 520" TESSEL_SWEEP_TIMEOUT=560 scripts/device_run sweep > $D/sweep.log 2>&1
echo "sweep rc $?"
tar -C /tmp -czf $OUT/c5.tgz c5
tail -30 $D/sweep.log
