#!/bin/bash
# Call 2: the staged wgmma epilogue (each consumer's rows through a shared-memory slab, stored
# along rows) and batched wgmma -- GPU tests, then 50 GEMMs of the sweep (the 30 slowest of
# 2026-11-27c call 5 and every 8th of the rest), then the forms side by side.
set -u
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
D=/tmp/c2; mkdir -p $D
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $D/nvidia-smi.csv
timeout 180 dist/tessel/bin/tessel_tests -tc="cuda mma*,cuda sparse*,cuda families*" > $D/tests.log 2>&1; echo "tests rc $?"; tail -4 $D/tests.log
grep -B3 -A12 "ERROR\|FAILED" $D/tests.log | head -40
IDS="gemm.gpt2.lm_head.m8192.bf16 gemm.gpt2.lm_head.m8192.f16 gemm.llama7b.scores.s2048.f16 gemm.convnext_t.pw2_c768.b32.f16 gemm.bert.scores.b32s128.f16 gemm.bert.scores.b32s128.bf16 gemm.bert.roberta_mlm_head.m4096.bf16 gemm.gpt2.lm_head.m1024.bf16 gemm.bert.roberta_mlm_head.m4096.f16 gemm.sd_unet.geglu_c1280.m512.f16 gemm.sd_unet.geglu_c1280.m512.bf16 gemm.sd_unet.geglu_c640.m2048.bf16 gemm.sd_unet.attn_qkv_c320.m8192.bf16 gemm.bert.qkv.m16384.bf16 gemm.sd_unet.geglu_c320.m8192.bf16 gemm.sd_unet.attn_qkv_c320.m8192.f16 gemm.bert.attn_out.m512.f16 gemm.sd_unet.cross_kv_c640.m154.bf16 gemm.bert.attn_out.m512.bf16 gemm.vit_b16.qkv.m6304.bf16 gemm.sd_unet.cross_kv_c320.m154.bf16 gemm.sd_unet.geglu_c640.m2048.f16 gemm.sd_unet.cross_kv_c320.m154.f16 gemm.bert.mlm_head.m4096.bf16 gemm.llama7b.down.m8192.bf16 gemm.sd_unet.cross_kv_c1280.m154.bf16 gemm.vit_b16.attn_out.m6304.f16 gemm.gpt2.qkv.m8192.bf16 gemm.sd_unet.attn_qkv_c640.m2048.bf16 gemm.gpt2.attn_out.m1024.bf16 gemm.bert.mlm_head.m4096.f16 gemm.bert.qkv.m4096.f16 gemm.vit_b16.ffn_up.m197.f16 gemm.llama7b.gate_up_swiglu.m512.bf16 gemm.whisper.qkv.m6000.f16 gemm.llama70b.qkv.m512.f16 gemm.convnext_t.pw2_c384.b32.f16 gemm.vit_b16.head.m32.f16 gemm.gemma7b.down.m2048.f16 gemm.vit_l16.head.m32.bf16 gemm.whisper.ffn_down.m6000.bf16 gemm.bert.ffn_up.m16384.bf16 gemm.llama7b.qkv.m1.bf16 gemm.llama7b.qkv.m2048.f16 gemm.vit_b16.qkv.m6304.f16 gemm.llama7b.lm_head.m16.bf16 gemm.llama7b.down.m4.f16 gemm.gpt2.ffn_down.m1024.bf16 gemm.dlrm.kaggle_bot_64_16.m4096.f16 gemm.dlrm.bot_13_512.m2048.f16 gemm.bert.pv.b32s128.f16 gemm.llama7b.scores.s2048.bf16"
OUT=$D TESSEL_SWEEP_ARGS="--only $IDS --time-budget 200" TESSEL_SWEEP_TIMEOUT=230 scripts/device_run sweep > $D/sweep.log 2>&1
echo "sweep rc $?"; grep -E "^\[" $D/sweep.log | tail -60
timeout 140 python3 experiments/wgmma_variants/run_variants.py --tessel dist/tessel/bin/tessel --out $D/variants --ids gemm.llama7b.qkv.m8192 gemm.bert.ffn_up.m4096 gemm.gpt2.attn_out.m8192 gemm.vit_l16.attn_out.m6304 --dtypes f16 > $D/variants.log 2>&1
echo "variants rc $?"; tail -10 $D/variants.log
rm -rf $D/variants/work
tar -C /tmp -czf $OUT/c2.tgz c2
