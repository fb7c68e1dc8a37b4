set -u
D=/tmp/c2; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv > $D/nvidia-smi.csv
date -u > $D/date.txt
cp tmp_call2.sh $D/call.sh
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tessel-cuda-cache
T=dist/tessel/bin/tessel; SPEC=hw_specs/nvidia-h100-sxm.json
# 1. the GPU tests this change touches
timeout 120 dist/tessel/bin/tessel_tests -tc="cuda families*,cuda sparse*" > $D/tests.log 2>&1; echo "tests rc=$?" >> $D/tests.log
tail -4 $D/tests.log
# 2. A/B: the old binary's schedules (before) against this binary's (after)
IDS=$(ls tmp_ab/schedules | sed 's/\.before\.json$//; /\.m128n64\.json$/d' | tr '\n' ' ')
timeout 300 python3 experiments/family_ranking/run_ab.py --tessel $T --schedules tmp_ab/schedules --out $D/ab --jobs 16 --ids $IDS > $D/ab_log.txt 2>&1; echo "ab rc=$?" >> $D/ab_log.txt
rm -rf $D/ab/work
tail -40 $D/ab_log.txt
# 3. beside torch.compile and the vendor library, in one run
OUT=$D TESSEL_SWEEP_ARGS="--only conv.mobilenetv2.pw_expand_24_144.b32.nhwc.f16 conv.sd_unet.conv_in.b2.nhwc.f16 gemm.vit_b16.attn_out.m197.f16 gemm.sd_unet.cross_kv_c320.m154.f16 gemm.dlrm.bot_256_128.m2048.f16 gemm.bert.attn_out.m512.f16 conv.resnet50.conv4_3x3.b1.nhwc.f16 gemm.dlrm.bot_512_256.m2048.f16 --time-budget 90" TESSEL_SWEEP_TIMEOUT=110 scripts/device_run sweep > $D/sweep_log.txt 2>&1
tail -15 $D/sweep_log.txt
tar -C /tmp -czf $OUT/c2.tgz c2
