#!/usr/bin/env bash
# 64-row blocks two an SM (tile rule): GPU tests, A/B on the moved op-sweep instances and GEMMs;
# tiny DeiT/ViT exports; SASS of two emitted GEMM kernels.
set -u
D=/tmp/p4; mkdir -p $D/onnx
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
xz -dc tmp_variants/tessel.xz > dist/tessel/libexec/tessel_new; xz -dc tmp_variants/tessel_tests.xz > dist/tessel/libexec/tessel_tests
chmod +x dist/tessel/libexec/tessel_new dist/tessel/libexec/tessel_tests
sed 's|libexec/tessel"|libexec/tessel_new"|' dist/tessel/bin/tessel > dist/tessel/bin/tessel_new; chmod +x dist/tessel/bin/tessel_new
export TESSEL_SOURCE_DIR=$PWD
OLD=dist/tessel/bin/tessel; NEW=dist/tessel/bin/tessel_new; HW=hw_specs/nvidia-h100-sxm.json
cp tmp_diag/callp4.sh $D/; nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv > $D/nvidia-smi.csv
timeout 60 python3 tmp_diag/export_tiny.py $D/onnx > $D/export.log 2>&1; tail -2 $D/export.log
timeout 90 python3 tmp_diag/prof.py export /tmp/onnx deit_small_b8 bert_base_b8_s128 > $D/export2.log 2>&1; ls /tmp/onnx
for f in deit_proj deit_fc1; do
  nvcc -arch=sm_90a -std=c++17 --expt-relaxed-constexpr -cubin -o /tmp/$f.cubin tmp_diag/cu/$f.cu 2>/dev/null && cuobjdump -sass /tmp/$f.cubin > $D/$f.sass; wc -l $D/$f.sass
done
TESSEL_CACHE_DIR=/tmp/cache_tests timeout 150 dist/tessel/bin/tessel_tests -tc="cuda mma run: 64-row*,cuda mma run: the tensor-core variants*" > $D/tests.log 2>&1; echo "tests rc=$?"; tail -3 $D/tests.log
python3 experiments/op_sweep/instances.py --out /tmp/sw --only gemm.gpt2.attn_out.m1024.bf16 gemm.gpt2.attn_out.m1024.f16 gemm.sd_unet.attn_out_c1280.m512.bf16 gemm.sd_unet.attn_out_c1280.m512.f16 gemm.vit_b16.ffn_up.m197.bf16 gemm.vit_b16.ffn_up.m197.f16 gemm.vit_b16.qkv.m197.bf16 gemm.vit_b16.qkv.m197.f16 gemm.vit_l16.qkv.m197.bf16 gemm.vit_l16.qkv.m197.f16 > /dev/null
for m in /tmp/sw/*.json tmp_diag/gm/deit_proj.json tmp_diag/gm/bert8_q.json tmp_diag/gm/ksweep_k768.json; do
  r=$(timeout 60 $NEW run $m --device cuda --hw $HW --check 2>&1 | grep -o 'relative L2 error [0-9.e-]*\|mismatch\|error.*' | head -1); echo "$(basename $m) $r" >> $D/check.txt
done; cat $D/check.txt
timeout $((560 - SECONDS)) python3 tmp_diag/ab.py $OLD $NEW $HW $D/ab.csv 330 /tmp/sw/*.json tmp_diag/gm/deit_proj.json tmp_diag/gm/bert8_q.json tmp_diag/gm/ksweep_k768.json tmp_diag/gm/deit_proj_res.json /tmp/onnx/deit_small_b8.onnx /tmp/onnx/bert_base_b8_s128.onnx > $D/ab.txt 2>&1; cat $D/ab.txt
tar -C /tmp -czf $OUT/p4.tgz p4
