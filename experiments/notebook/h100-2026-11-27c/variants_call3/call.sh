#!/bin/bash
set -u
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
D=/tmp/c3; mkdir -p $D
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $D/nvidia-smi.csv
timeout 200 dist/tessel/bin/tessel_tests -tc="cuda mma*,cuda sparse*" > $D/tests.log 2>&1; echo "tests rc $?"; grep -E "ERROR|FAILED" $D/tests.log | head; tail -3 $D/tests.log
FEW="gemm.vit_l16.ffn_down.m197 gemm.sd_unet.ff_out_c1280.m512 gemm.bert.ffn_down.m512 gemm.vit_b16.ffn_up.m197 gemm.vit_l16.qkv.m197 gemm.sd_unet.cross_kv_c1280.m154 gemm.sd_unet.attn_out_c1280.m512 gemm.dlrm.bot_512_256.m2048 gemm.llama7b.o.m512"
timeout 200 python3 experiments/wgmma_variants/run_variants.py --tessel dist/tessel/bin/tessel --out $D/few --ids $FEW \
  --variants as_scheduled "unsplit:split_k=1,cluster_m=-" "split2:split_k=2,persistent=-,pingpong=-,cluster_m=-" "split4:split_k=4,persistent=-,pingpong=-,cluster_m=-" "split8:split_k=8,persistent=-,pingpong=-,cluster_m=-" > $D/few.log 2>&1
echo "few rc $?"
MANY="gemm.bert.attn_out.m16384 gemm.gpt2.attn_out.m8192 gemm.vit_l16.attn_out.m6304 gemm.whisper.ffn_up.m6000 gemm.llama7b.qkv.m8192 gemm.llama70b.lm_head.m2048 gemm.bert.mlm_head.m4096 gemm.convnext_t.pw1_c384.b32 gemm.sd_unet.geglu_c320.m8192 gemm.llama7b.gate_up_swiglu.m2048"
timeout 330 python3 experiments/wgmma_variants/run_variants.py --tessel dist/tessel/bin/tessel --out $D/many --ids $MANY \
  --variants as_scheduled "coop128:block_n=128,stages=6,persistent=1,pingpong=-,cluster_m=-" "coop256:block_n=256,stages=4,persistent=1,pingpong=-,cluster_m=-" \
  "pingpong:block_n=128,stages=6,persistent=1,pingpong=1,cluster_m=-" "mc128:block_n=128,stages=6,persistent=1,pingpong=-,cluster_m=2" \
  "mc256:block_n=256,stages=4,persistent=1,pingpong=-,cluster_m=2" > $D/many.log 2>&1
echo "many rc $?"
rm -rf $D/few/work $D/many/work
tar -C /tmp -czf $OUT/c3.tgz c3
tail -14 $D/few.log; tail -16 $D/many.log
