#!/bin/bash
set -u
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
D=/tmp/c6; mkdir -p $D
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $D/nvidia-smi.csv
IDS="gemm.convnext_t.pw2_c768.b32.f16 gemm.convnext_t.pw2_c768.b32.bf16 gemm.convnext_t.pw1_c384.b32.f16 gemm.vit_l16.ffn_down.m197.f16 gemm.sd_unet.ff_out_c1280.m512.f16 gemm.bert.ffn_down.m512.bf16 gemm.vit_b16.ffn_up.m197.f16 gemm.llama7b.o.m512.f16"
OUT=$D TESSEL_SWEEP_ARGS="--only $IDS --time-budget 170" TESSEL_SWEEP_TIMEOUT=210 scripts/device_run sweep > $D/sweep.log 2>&1
echo "sweep rc $?"
tar -C /tmp -czf $OUT/c6.tgz c6
tail -14 $D/sweep.log
