set -u
D=/tmp/c3; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $D/nvidia-smi.csv
date -u > $D/date.txt
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tessel-cuda-cache
cp tmp_call3.sh $D/call.sh
timeout 120 dist/tessel/bin/tessel_tests -tc="cuda vector*,cuda row*" > $D/tests.log 2>&1; echo "tests rc=$?" >> $D/tests.log
grep -B3 -A8 "ERROR" $D/tests.log | head -60; tail -4 $D/tests.log
tar -C /tmp -czf $OUT/c3.tgz c3
OUT=$D TESSEL_SWEEP_ARGS="--only pool.resnet50.maxpool.b32.nhwc.f16 pool.resnet50.gap.b32.nhwc.f16 pool.resnet50.gap.b1.nhwc.f16 pool.efficientnet_b0.gap_c240.b32.nhwc.f16 pool.efficientnet_b0.gap_c144.b32.nhwc.f16 pool.efficientnet_b0.gap_c96.b8.nhwc.f16 pool.efficientnet_b0.gap_c32.b1.nhwc.f16 pool.resnet50.maxpool.b32.f16 pool.resnet50.gap.b32.f16 pool.resnet50.avgpool_d.b32.f16 pool.deeplabv3.aspp_gap.b8.f16 pool.mobilenetv2.gap.b32.f16 pool.efficientnet_b0.se_c144.b32.f16 pool.efficientnet_b0.se_c480.b32.f16 pool.efficientnet_b0.se_c1152.b32.f16 pool.efficientnet_b0.gap_c240.b32.f16 pool.convnext_t.gap.b32.f16 conv.mobilenetv2.dw3x3_c32.b32.nchw.f16 conv.resnext50.conv2_3x3_g32.b32.nhwc.f16 conv.convnext_t.dw7x7_c96.b32.nhwc.f16 conv.efficientnet_b0.dw5x5_c1152.b32.nchw.f16 --time-budget 170" TESSEL_SWEEP_TIMEOUT=190 scripts/device_run sweep > $D/sweep_log.txt 2>&1
grep -E "^\[|done|phase" $D/sweep_log.txt | tail -20
tar -C /tmp -czf $OUT/c3.tgz c3
OUT=$D TESSEL_MODELS_ARGS="--only efficientnet_b0 --skip-bundled --time-budget 180 --call-limit 200" TESSEL_MODELS_TIMEOUT=210 scripts/device_run models > $D/models_log.txt 2>&1
tail -6 $D/models_log.txt
tar -C /tmp -czf $OUT/c3.tgz c3
