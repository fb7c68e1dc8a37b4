set -u
D=/tmp/c1; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv > $D/nvidia-smi.csv
date -u > $D/date.txt
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tessel-cuda-cache
cp tmp_call1.sh $D/call.sh
timeout 200 dist/tessel/bin/tessel_tests -tc="cuda mma*,cuda vector*,normalize*" > $D/tests.log 2>&1; echo "tests rc=$?" >> $D/tests.log
grep -B3 -A8 "ERROR" $D/tests.log | head -60; tail -4 $D/tests.log
tar -C /tmp -czf $OUT/c1.tgz c1
OUT=$D TESSEL_SWEEP_ARGS="--only conv.resnext50.conv2_3x3_g32.b32.nchw.f16 conv.resnext50.conv2_3x3_g32.b32.nhwc.f16 conv.resnext50.conv3_3x3_g32_s2.b32.nchw.f16 conv.resnext50.conv3_3x3_g32_s2.b32.nhwc.f16 conv.resnext50.conv4_3x3_g32.b32.nchw.f16 conv.resnext50.conv4_3x3_g32.b32.nhwc.f16 pool.efficientnet_b0.se_c144.b32.f16 pool.efficientnet_b0.se_c480.b32.f16 pool.efficientnet_b0.se_c1152.b32.f16 eltwise.efficientnet_b0.se_excite_c240.b32.f16 conv.resnet50.conv4_3x3_c256_256.b32.nhwc.f16 conv.mobilenetv2.pw_expand_24_144.b32.nhwc.f16 conv.sd_unet.conv_in.b2.nhwc.f16 --time-budget 200" TESSEL_SWEEP_TIMEOUT=220 scripts/device_run sweep > $D/sweep_log.txt 2>&1
grep -E "^\[|done|phase" $D/sweep_log.txt | tail -20
tar -C /tmp -czf $OUT/c1.tgz c1
OUT=$D TESSEL_MODELS_ARGS="--only resnext50 efficientnet_b0 --skip-bundled --time-budget 200 --call-limit 220" TESSEL_MODELS_TIMEOUT=230 scripts/device_run models > $D/models_log.txt 2>&1
tail -8 $D/models_log.txt
tar -C /tmp -czf $OUT/c1.tgz c1
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for f in tmp_models/*.json; do
  b=$(basename $f .json)
  timeout 100 $ncu --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --target-processes all \
    dist/tessel/bin/tessel run $f --device cuda --hw hw_specs/nvidia-h100-sxm.json > $D/ncu_$b.txt 2>&1
done
tar -C /tmp -czf $OUT/c1.tgz c1
