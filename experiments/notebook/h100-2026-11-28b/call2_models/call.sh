set -u
D=/tmp/c2; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $D/nvidia-smi.csv
date -u > $D/date.txt
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tessel-cuda-cache
timeout 150 dist/tessel/bin/tessel_tests -tc="cuda vector*,cuda families*" > $D/tests.log 2>&1; echo "tests rc=$?" >> $D/tests.log
tail -4 $D/tests.log
cp tmp_call2.sh $D/call.sh
tar -C /tmp -czf $OUT/c2.tgz c2
OUT=$D TESSEL_MODELS_ARGS="--only efficientnet_b0 resnet50 mobilenet_v2 --skip-bundled --time-budget 330 --call-limit 360" TESSEL_MODELS_TIMEOUT=370 scripts/device_run models > $D/models_log.txt 2>&1
tail -12 $D/models_log.txt
tar -C /tmp -czf $OUT/c2.tgz c2
