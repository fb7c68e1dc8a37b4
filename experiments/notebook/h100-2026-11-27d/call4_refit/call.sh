#!/bin/bash
# Call 4: after the cost model's refit for the staged epilogue -- every CUDA test case and every
# bundled model against the interpreter (scripts/device_run check), then the GEMMs of call 2 whose
# form the refit changes (and a few it does not) timed again.
set -u
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
D=/tmp/c4; mkdir -p $D
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $D/nvidia-smi.csv
OUT=$D scripts/device_run check > $D/check.log 2>&1; echo "check rc $?"; tail -5 $D/check.log
IDS="gemm.sd_unet.geglu_c1280.m512.f16 gemm.sd_unet.geglu_c1280.m512.bf16 gemm.vit_b16.attn_out.m6304.f16 gemm.convnext_t.pw2_c384.b32.f16 gemm.bert.ffn_up.m16384.bf16 gemm.gpt2.lm_head.m8192.f16 gemm.bert.roberta_mlm_head.m4096.f16 gemm.llama7b.down.m8192.bf16 gemm.bert.qkv.m16384.bf16 gemm.bert.mlm_head.m4096.f16 gemm.whisper.qkv.m6000.f16 gemm.sd_unet.geglu_c320.m8192.bf16 gemm.gpt2.qkv.m8192.bf16 gemm.vit_b16.qkv.m6304.f16 gemm.llama7b.scores.s2048.f16 gemm.bert.attn_out.m512.f16"
OUT=$D TESSEL_SWEEP_ARGS="--only $IDS --time-budget 150" TESSEL_SWEEP_TIMEOUT=175 scripts/device_run sweep > $D/sweep.log 2>&1
echo "sweep rc $?"; grep -E "^\[" $D/sweep.log | tail -20
tar -C /tmp -czf $OUT/c4.tgz c4
