set -u
D=/tmp/c3; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tessel-cuda-cache
timeout 150 dist/tessel/bin/tessel_tests -tc="cuda vector*,normalize*,cuda codegen*" > $D/tests.log 2>&1; echo "tests rc=$?" >> $D/tests.log
tail -4 $D/tests.log
IDS="conv.resnext50.conv2_3x3_g32.b32.nchw.f16 conv.resnext50.conv2_3x3_g32.b32.nhwc.f16 conv.resnext50.conv3_3x3_g32_s2.b32.nchw.f16 conv.resnext50.conv3_3x3_g32_s2.b32.nhwc.f16 conv.resnext50.conv4_3x3_g32.b32.nchw.f16 conv.resnext50.conv4_3x3_g32.b32.nhwc.f16 conv.convnext_t.dw7x7_c96.b32.nhwc.f16 conv.efficientnet_b0.dw5x5_c480.b32.nhwc.f16 conv.mobilenetv2.dw3x3_c32.b32.nchw.f16"
OUT=$D TESSEL_SWEEP_ARGS="--only $IDS --time-budget 120" TESSEL_SWEEP_TIMEOUT=150 scripts/device_run sweep > $D/sweep_log.txt 2>&1
grep -E "^\[|done" $D/sweep_log.txt
OUT=$D TESSEL_MODELS_ARGS="--only resnext50 resnet50 mobilenet_v2 efficientnet_b0 --skip-bundled --time-budget 330 --call-limit 360" TESSEL_MODELS_TIMEOUT=370 scripts/device_run models > $D/models_log.txt 2>&1
cp tmp_call3.sh $D/call.sh
tar -C /tmp -czf $OUT/c3.tgz c3
tail -16 $D/models_log.txt
