set -u
D=/tmp/c6; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv > $D/nvidia-smi.csv
date -u > $D/date.txt
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tessel-cuda-cache
cp tmp_call6.sh $D/call.sh
OUT=$D TESSEL_SWEEP_ARGS="--only conv.sd_unet.conv_in.b2.nhwc.f16 conv.mobilenetv2.pw_expand_24_144.b32.nhwc.f16 gemm.vit_b16.attn_out.m197.f16 gemm.sd_unet.cross_kv_c320.m154.f16 gemm.dlrm.bot_256_128.m2048.f16 attention.sd_unet.self_s256_d160.b2.f16 --time-budget 120" TESSEL_SWEEP_TIMEOUT=140 scripts/device_run sweep > $D/sweep_log.txt 2>&1
grep -E "^\[|done" $D/sweep_log.txt | tail -10
tar -C /tmp -czf $OUT/c6.tgz c6
