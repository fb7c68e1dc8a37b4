set -u
D=/tmp/c5; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tessel-cuda-cache
cp tmp_call5.sh $D/call.sh
timeout 60 dist/tessel/bin/tessel_tests -tc="cuda vector*" > $D/tests.log 2>&1; echo "tests rc=$?" >> $D/tests.log
grep -B3 -A8 "ERROR" $D/tests.log | head -30; tail -3 $D/tests.log
tar -C /tmp -czf $OUT/c5.tgz c5
OUT=$D TESSEL_SWEEP_ARGS="--only pool.resnet50.maxpool.b32.f16 pool.resnet50.avgpool_d.b32.f16 pool.resnet50.maxpool.b32.nhwc.f16 --time-budget 80 --jobs 3 --torch-workers 3" TESSEL_SWEEP_TIMEOUT=100 scripts/device_run sweep > $D/sweep_log.txt 2>&1
grep -E "^\[|done|phase" $D/sweep_log.txt | tail -6
tar -C /tmp -czf $OUT/c5.tgz c5
