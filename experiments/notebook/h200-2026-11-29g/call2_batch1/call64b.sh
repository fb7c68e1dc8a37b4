#!/usr/bin/env bash
# Call 2 (64-row wgmma blocks, one wave, no persistent grid): (1) the 64-row GPU test, (2) the 22
# op-sweep instances the final rule moves + 10 GEMMs of batch-1 transformers checked (new), (3) old
# (HEAD 64f9a66) vs new interleaved on the 10 GEMMs and 4 of the 22, cuBLAS beside, (4) real
# models (new, against torch.compile), then old vs new on their ONNX files.
set -u
D=/tmp/c64b; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
for b in tessel tessel_head tessel_tests; do xz -dc tmp_variants/$b.xz > dist/tessel/libexec/${b}_x; chmod +x dist/tessel/libexec/${b}_x; done
mv dist/tessel/libexec/tessel_tests_x dist/tessel/libexec/tessel_tests
sed 's|libexec/tessel"|libexec/tessel_x"|' dist/tessel/bin/tessel > dist/tessel/bin/tessel_new
sed 's|libexec/tessel"|libexec/tessel_head_x"|' dist/tessel/bin/tessel > dist/tessel/bin/tessel_old; chmod +x dist/tessel/bin/tessel_*
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv > $D/nvidia-smi.csv
date -u > $D/date.txt; cp tmp_diag/call64b.sh tmp_diag/changed64b.txt tmp_diag/ab.py tmp_diag/torch_g64.py $D/
export TESSEL_SOURCE_DIR=$PWD
OLD=dist/tessel/bin/tessel_old; NEW=dist/tessel/bin/tessel_new; HW=hw_specs/nvidia-h100-sxm.json
TESSEL_CACHE_DIR=/tmp/cache_tests timeout 100 dist/tessel/bin/tessel_tests -tc="cuda mma run: 64-row*" > $D/tests.log 2>&1; echo "tests rc=$?" | tee -a $D/tests.log; tail -2 $D/tests.log
python3 experiments/op_sweep/instances.py --out $D/models --only $(cat tmp_diag/changed64b.txt) > /dev/null
cp tmp_diag/g64/*.json $D/models/
ls $D/models/*.json | TESSEL_CACHE_DIR=/tmp/cache_new timeout 100 xargs -P 12 -I{} sh -c "$NEW run {} --device cuda --hw $HW --check --threads 4 > {}.new.check 2>&1; echo \"\$? {}\"" > $D/check_rc.txt
echo "checks: $(grep -c '^0 ' $D/check_rc.txt) passed of $(wc -l < $D/check_rc.txt)"; grep -v '^0 ' $D/check_rc.txt | head
ls $D/models/*.json | TESSEL_CACHE_DIR=/tmp/cache_old timeout 40 xargs -P 8 -I{} sh -c "$OLD compile {} --device cuda --hw $HW > /dev/null 2>&1"
timeout 60 python3 tmp_diag/torch_g64.py 128x768x768 128x768x2304 128x768x3072 128x3072x768 128x2048x2048 128x2048x5632 128x5632x2048 512x768x3072 512x3072x768 512x768x2304 512x768x768 > $D/cublas.txt 2>&1; cat $D/cublas.txt
timeout 170 python3 tmp_diag/ab.py $OLD $NEW $HW $D/ab_gemms.csv 160 $D/models/g_*.json $D/models/gemm.bert.attn_out.m512.f16.json $D/models/conv.sd_unet.res_conv_c1280_8.b2.nhwc.f16.json $D/models/gemm.vit_b16.attn_out.m197.f16.json > $D/ab_gemms.txt 2>&1; cat $D/ab_gemms.txt
CASES="bert_base_b1_s128 llama_2048x4_b1_s128 gpt2_b4_s128"
timeout 200 python3 experiments/real_models/run_real_models.py --tessel $NEW --hw $HW --out $D/real-models --skip-bundled \
  --only $CASES --warm-jobs 8 --warm-timeout 150 --time-budget 180 > $D/models.log 2>&1
echo "models rc=$?"; tail -12 $D/models.log
R=""; for id in bert_base_b1_s128 llama_2048x4_b1_s128 gpt2_b4_s128; do f=/tmp/tessel-real-models/onnx/$id.onnx; [[ -f $f ]] && R="$R $f"; done
[[ -n "$R" ]] && timeout $((590 - SECONDS)) python3 tmp_diag/ab.py $OLD $NEW $HW $D/ab_models.csv $((570 - SECONDS)) $R > $D/ab_models.txt 2>&1; cat $D/ab_models.txt
tar -C /tmp -czf $OUT/c64b.tgz c64b
