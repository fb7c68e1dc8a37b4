set -u
D=/tmp/c4; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $D/nvidia-smi.csv
date -u > $D/date.txt
cp tmp_call4.sh $D/call.sh
OUT=$D TESSEL_CHECK_TIMEOUT=540 scripts/device_run check > $D/check_log.txt 2>&1
echo "check rc=$?" >> $D/check_log.txt
tar -C /tmp -czf $OUT/c4.tgz c4
tail -16 $D/check_log.txt
