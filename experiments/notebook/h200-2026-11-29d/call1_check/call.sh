set -u
D=/tmp/c1; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv > $D/nvidia-smi.csv
date -u > $D/date.txt
cp tmp_call1.sh $D/call.sh
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tessel-cuda-cache
# every CUDA test case and bundled model on the GPU (checks the review fixes of 8b6bb93 on a GPU)
OUT=$D TESSEL_CHECK_TIMEOUT=575 scripts/device_run check > $D/check_log.txt 2>&1; echo "check rc=$?" >> $D/check_log.txt
tail -8 $D/check_log.txt
tar -C /tmp -czf $OUT/c1.tgz c1
