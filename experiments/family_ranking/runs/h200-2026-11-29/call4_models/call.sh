set -u
D=/tmp/c4; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv > $D/nvidia-smi.csv
date -u > $D/date.txt
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tessel-cuda-cache
cp tmp_call4.sh $D/call.sh
timeout 150 dist/tessel/bin/tessel_tests -tc="cuda families*,cuda mma*" > $D/tests.log 2>&1; echo "tests rc=$?" >> $D/tests.log
grep -B3 -A8 "ERROR" $D/tests.log | head -40; tail -4 $D/tests.log
tar -C /tmp -czf $OUT/c4.tgz c4
OUT=$D TESSEL_MODELS_ARGS="--only mobilenet_v2 vit_b_16 deit_small --skip-bundled --time-budget 330 --call-limit 360" TESSEL_MODELS_TIMEOUT=370 scripts/device_run models > $D/models_log.txt 2>&1
tail -12 $D/models_log.txt
tar -C /tmp -czf $OUT/c4.tgz c4
