set -u
D=/tmp/c2; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv > $D/nvidia-smi.csv
date -u > $D/date.txt
cp tmp_call2.sh $D/call.sh
export TESSEL_SOURCE_DIR=$PWD
S="python3 experiments/op_sweep/run_sweep.py --hw hw_specs/nvidia-h100-sxm.json"
CHANGED="conv.efficientnet_b0.pw_1152_192.b32.nchw.f16 conv.efficientnet_b0.pw_40_240.b32.nchw.f16 conv.mobilenetv2.pw_expand_24_144.b32.nchw.f16 conv.mobilenetv2.pw_last_320_1280.b32.nchw.f16 conv.mobilenetv2.pw_project_960_160.b32.nchw.f16 conv.resnet50.conv2_1x1_c64_256.b32.nchw.f16 conv.resnet50.conv2_1x1_c64_64.b32.nchw.f16 conv.resnet50.conv4_1x1_c1024_256.b32.nchw.f16 conv.resnet50.conv5_1x1_c512_2048.b32.nchw.f16"
# 0. the bundle's tessel (28f0749) on the 9 changed instances, Tessel only (the "before")
cp -r dist/tessel /tmp/old_tessel
TESSEL_CACHE_DIR=/tmp/cc_o timeout 100 $S --tessel /tmp/old_tessel/bin/tessel --no-torch --out $D/before --work /tmp/w_o --time-budget 70 --only $CHANGED > $D/before_log.txt 2>&1; echo "rc=$?" >> $D/before_log.txt; tail -3 $D/before_log.txt
# this change: narrow reads on mma.sync, NCHW 1x1 convolutions as batched MatMuls
xz -dc tmp_variants/tessel.xz > dist/tessel/libexec/tessel; xz -dc tmp_variants/tessel_tests.xz > dist/tessel/libexec/tessel_tests
chmod +x dist/tessel/libexec/tessel dist/tessel/libexec/tessel_tests
# 1. the tensor-core cases on the GPU (against the interpreter), with the unaligned ones
timeout 170 dist/tessel/bin/tessel_tests -tc="cuda mma run: tensor-core kernels match*,cuda mma run: the tensor-core variants*" > $D/tests.log 2>&1; echo "tests rc=$?" >> $D/tests.log; tail -4 $D/tests.log
# 2. the 9 changed instances with the PyTorch baselines
TESSEL_CACHE_DIR=/tmp/cc_a timeout 120 $S --tessel dist/tessel/bin/tessel --out $D/after --work /tmp/w_a --time-budget 90 --only $CHANGED > $D/after_log.txt 2>&1; echo "rc=$?" >> $D/after_log.txt; tail -3 $D/after_log.txt
# 3. the other half of the convolution class (--shard 1/2), with the baselines
TESSEL_CACHE_DIR=/tmp/cc_c timeout 200 $S --tessel dist/tessel/bin/tessel --classes conv --shard 1/2 --out $D/conv --work /tmp/w_c --time-budget 150 > $D/conv_log.txt 2>&1; echo "rc=$?" >> $D/conv_log.txt; tail -3 $D/conv_log.txt
tar -C /tmp -czf $OUT/c2.tgz c2
