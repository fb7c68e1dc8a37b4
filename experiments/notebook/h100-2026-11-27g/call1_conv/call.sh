#!/usr/bin/env bash
# GPU call 1 (issue 23): box-tiled convolutions on the wgmma kernel -- the tensor-core CUDA tests
# (every mma/wgmma case incl. the new convolution cases, against the interpreter), then the op
# sweep's dense convolutions that the wgmma kernel can now take (N >= 128), side by side with
# eager, torch.compile and cuDNN in the same run.
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
D=/tmp/c1; rm -rf $D; mkdir -p $D
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $D/nvidia-smi.csv
timeout 240 dist/tessel/bin/tessel_tests -tc="cuda mma*" > $D/tests_mma.log 2>&1; echo "mma tests rc=$?"
tail -4 $D/tests_mma.log; grep -B3 -A12 "ERROR\|FATAL" $D/tests_mma.log | head -80
ids="conv.resnet50.conv2_1x1_c64_256.b32.nhwc.f16 conv.resnet50.conv3_1x1s2_c256_512.b32.nhwc.f16 conv.resnet50.conv3_3x3s2_c128_128.b32.nhwc.f16
conv.resnet50.conv4_3x3_c256_256.b32.nhwc.f16 conv.resnet50.conv4_1x1_c1024_256.b32.nhwc.f16 conv.resnet50.conv5_3x3_c512_512.b32.nhwc.f16
conv.resnet50.conv5_1x1_c512_2048.b32.nhwc.f16 conv.resnet50.conv4_3x3.b1.nhwc.f16 conv.deeplabv3.conv4_3x3_d2.b8.nhwc.f16
conv.deeplabv3.conv5_3x3_d4.b8.nhwc.f16 conv.deeplabv3.aspp_3x3_d12.b8.nhwc.f16 conv.mobilenetv2.pw_expand_24_144.b32.nhwc.f16
conv.mobilenetv2.pw_project_960_160.b32.nhwc.f16 conv.mobilenetv2.pw_last_320_1280.b32.nhwc.f16 conv.efficientnet_b0.pw_40_240.b32.nhwc.f16
conv.efficientnet_b0.pw_1152_192.b32.nhwc.f16 conv.convnext_t.down2x2s2_c96.b32.nhwc.f16 conv.sd_unet.conv_in.b2.nhwc.f16
conv.sd_unet.res_conv_c320_64.b2.nhwc.f16 conv.sd_unet.res_conv_c640_32.b2.nhwc.f16 conv.sd_unet.res_conv_c1280_16.b2.nhwc.f16
conv.sd_unet.res_conv_c1280_8.b2.nhwc.f16 conv.sd_unet.down_c320.b2.nhwc.f16 conv.sd_unet.up_cat_c2560_1280.b2.nhwc.f16
conv.whisper.conv2_as_2d.b4.nhwc.f16 conv.resnet50.conv3_1x1s2_c256_512.b32.nchw.f16 conv.resnet50.conv5_3x3_c512_512.b32.nchw.f16
conv.sd_unet.res_conv_c640_32.b2.nchw.f16 conv.whisper.conv1.b4.ncw.f16 conv.whisper.conv2.b4.ncw.f16
conv.sd_unet.res_conv_c640_32.b2.nhwc.bf16 conv.sd_unet.res_conv_c320_64.b2.nhwc.bf16 conv.whisper.conv2_as_2d.b4.nhwc.bf16"
OUT=$D TESSEL_SWEEP_ARGS="--only $(echo $ids) --time-budget 250" TESSEL_SWEEP_TIMEOUT=300 scripts/device_run sweep > $D/sweep.log 2>&1
echo "sweep rc=$?"; tail -3 $D/sweep.log; cat $D/summary.txt
tar -C /tmp -czf $OUT/c1.tgz c1
python3 - <<'PY'
import csv,glob
for f in glob.glob('/tmp/c1/**/sweep.csv',recursive=True):
    for r in csv.DictReader(open(f)):
        print(f"{r['id']:55s} ok={r['tessel_correct']:5s} t={r['tessel_ms'][:7]} best={r['best_baseline_ms'][:7]} x={r['speedup_vs_best'][:5]} fam={r['families']}")
PY
