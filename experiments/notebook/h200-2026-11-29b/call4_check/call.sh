set -u
D=/tmp/c4; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
date -u > $D/date.txt
cp tmp_call4.sh $D/call.sh
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tessel-cuda-cache
OUT=$D TESSEL_CHECK_TIMEOUT=545 scripts/device_run check > $D/check_log.txt 2>&1; echo "check rc=$?" >> $D/check_log.txt
tail -12 $D/check_log.txt
grep -h "test cases\|assertions" $D/check/cuda_tests.log 2>/dev/null | tail -2
tar -C /tmp -czf $OUT/c4.tgz c4
