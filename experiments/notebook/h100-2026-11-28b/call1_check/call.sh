set -u
D=/tmp/c1; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $D/nvidia-smi.csv
date -u > $D/date.txt; git log -1 --format=%H > $D/commit.txt 2>/dev/null || true
OUT=$D TESSEL_CHECK_TIMEOUT=470 scripts/device_run check > $D/check_log.txt 2>&1
echo "check rc=$?" >> $D/check_log.txt
cp tmp_call1.sh $D/call.sh
tar -C /tmp -czf $OUT/c1.tgz c1
tail -40 $D/check_log.txt
