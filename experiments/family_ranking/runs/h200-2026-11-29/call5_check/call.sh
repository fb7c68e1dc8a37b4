set -u
D=/tmp/c5; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv > $D/nvidia-smi.csv
date -u > $D/date.txt
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tessel-cuda-cache
cp tmp_call5.sh $D/call.sh
OUT=$D TESSEL_CHECK_TIMEOUT=540 scripts/device_run check > $D/check_log.txt 2>&1
tail -25 $D/check_log.txt
tar -C /tmp -czf $OUT/c5.tgz c5
