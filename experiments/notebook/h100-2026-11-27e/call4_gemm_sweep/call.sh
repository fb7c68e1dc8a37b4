#!/usr/bin/env bash
# GPU call 4: the GEMM class of the op sweep again, as 2026-11-27c's call 5 ran it, after the
# staged epilogue and batched wgmma (27d) -- the same command, the current build.
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
D=/tmp/c4; mkdir -p $D
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $D/nvidia-smi.csv
OUT=$D TESSEL_SWEEP_ARGS="--classes gemm --time-budget 520" TESSEL_SWEEP_TIMEOUT=560 scripts/device_run sweep > $D/sweep.log 2>&1
echo "sweep rc $?"
tar -C /tmp -czf $OUT/c4.tgz c4
tail -30 $D/sweep.log
