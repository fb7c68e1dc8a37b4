#!/bin/bash
set -u
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
D=/tmp/c2; mkdir -p $D
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $D/nvidia-smi.csv
timeout 240 dist/tessel/bin/tessel_tests -tc="cuda mma*" > $D/tests.log 2>&1; echo "tests rc $?"; tail -4 $D/tests.log
timeout 420 python3 experiments/wgmma_variants/run_variants.py --tessel dist/tessel/bin/tessel --out $D/variants > $D/variants.log 2>&1
echo "variants rc $?"
rm -rf $D/variants/work
tar -C /tmp -czf $OUT/c2.tgz c2
cat $D/variants.log | tail -30
