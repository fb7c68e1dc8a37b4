set -u
D=/tmp/c2; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tessel-cuda-cache
timeout 200 dist/tessel/bin/tessel_tests -tc="cuda vector*,normalize*,cuda families*,cuda codegen*" > $D/tests.log 2>&1; echo "tests rc=$?" >> $D/tests.log
tail -5 $D/tests.log
OUT=$D TESSEL_SWEEP_ARGS="--only conv.resnext50.conv2_3x3_g32.b32.nchw.f16 conv.resnext50.conv2_3x3_g32.b32.nhwc.f16 conv.resnext50.conv3_3x3_g32_s2.b32.nchw.f16 conv.resnext50.conv3_3x3_g32_s2.b32.nhwc.f16 conv.resnext50.conv4_3x3_g32.b32.nchw.f16 conv.resnext50.conv4_3x3_g32.b32.nhwc.f16 conv.mobilenetv2.dw3x3_c32.b32.nchw.f16 conv.mobilenetv2.dw3x3_c32.b32.nhwc.f16 conv.mobilenetv2.dw3x3s2_c144.b32.nchw.f16 conv.mobilenetv2.dw3x3s2_c144.b32.nhwc.f16 conv.mobilenetv2.dw3x3_c576.b32.nchw.f16 conv.mobilenetv2.dw3x3_c576.b32.nhwc.f16 conv.efficientnet_b0.dw5x5s2_c144.b32.nchw.f16 conv.efficientnet_b0.dw5x5s2_c144.b32.nhwc.f16 conv.efficientnet_b0.dw5x5_c480.b32.nchw.f16 conv.efficientnet_b0.dw5x5_c480.b32.nhwc.f16 conv.efficientnet_b0.dw5x5_c1152.b32.nchw.f16 conv.efficientnet_b0.dw5x5_c1152.b32.nhwc.f16 conv.efficientnet_b0.dw3x3_c96.b32.nchw.f16 conv.efficientnet_b0.dw3x3_c96.b32.nhwc.f16 conv.convnext_t.dw7x7_c96.b32.nchw.f16 conv.convnext_t.dw7x7_c96.b32.nhwc.f16 conv.convnext_t.dw7x7_c384.b32.nchw.f16 conv.convnext_t.dw7x7_c384.b32.nhwc.f16 --time-budget 300" TESSEL_SWEEP_TIMEOUT=340 scripts/device_run sweep > $D/sweep_log.txt 2>&1
cp tmp_call2.sh $D/call.sh
tar -C /tmp -czf $OUT/c2.tgz c2
tail -45 $D/sweep_log.txt
