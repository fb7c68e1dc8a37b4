#!/usr/bin/env bash
# GPU call 4 (session 21): the GPU suite at the session's build (the gemv family, the simt forms,
# 1x1 convolutions as products since the last whole run at 1ba2167), H100 spec as every suite run.
set -u
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
D=$OUT/c4; mkdir -p $D; cp dist/call4.sh $D/call.sh
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv > $D/nvidia-smi.csv
timeout 420 python3 experiments/gpu_suite/run_suite.py --tessel dist/tessel/bin/tessel --no-autotune --out $D/suite --work /tmp/sw > $D/suite.log 2>&1
echo "suite rc=$? t=$SECONDS" >> $D/rc.txt
cat $D/rc.txt; tail -22 $D/suite.log
tar -C $OUT -czf $OUT/c4.tgz c4 && rm -rf $D
