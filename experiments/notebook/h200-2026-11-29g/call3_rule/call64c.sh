#!/usr/bin/env bash
# Call 3 (final rule: 64-row blocks one wave, at most 20 K tiles a block): (1) the three batch-1
# LLaMA/BERT GEMMs whose choice the rule moved, checked, then old vs new interleaved; (2) real
# models with the final build against PyTorch eager and torch.compile; (3) old vs new on their ONNX.
set -u
D=/tmp/c64c; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
for b in tessel tessel_head; do xz -dc tmp_variants/$b.xz > dist/tessel/libexec/${b}_x; chmod +x dist/tessel/libexec/${b}_x; done
sed 's|libexec/tessel"|libexec/tessel_x"|' dist/tessel/bin/tessel > dist/tessel/bin/tessel_new
sed 's|libexec/tessel"|libexec/tessel_head_x"|' dist/tessel/bin/tessel > dist/tessel/bin/tessel_old; chmod +x dist/tessel/bin/tessel_*
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv > $D/nvidia-smi.csv
date -u > $D/date.txt; cp tmp_diag/call64c.sh tmp_diag/ab.py $D/
export TESSEL_SOURCE_DIR=$PWD
OLD=dist/tessel/bin/tessel_old; NEW=dist/tessel/bin/tessel_new; HW=hw_specs/nvidia-h100-sxm.json
mkdir -p $D/models; cp tmp_diag/g64/g_128_2048_2048.json tmp_diag/g64/g_128_5632_2048.json tmp_diag/g64/g_128_3072_768.json $D/models/
for m in $D/models/*.json; do TESSEL_CACHE_DIR=/tmp/cache_new timeout 60 $NEW run $m --device cuda --hw $HW --check > $m.check 2>&1; echo "check rc=$? $(basename $m)"; done
timeout 70 python3 tmp_diag/ab.py $OLD $NEW $HW $D/ab_gemms.csv 60 $D/models/*.json > $D/ab_gemms.txt 2>&1; cat $D/ab_gemms.txt
CASES="bert_base_b1_s128 llama_2048x4_b1_s128 t5_small_encoder_b8_s128 whisper_base_encoder_b1 resnet50_b1 mobilenet_v2_b8"
timeout 330 python3 experiments/real_models/run_real_models.py --tessel $NEW --hw $HW --out $D/real-models --skip-bundled \
  --only $CASES --warm-jobs 8 --warm-timeout 180 --time-budget 310 > $D/models.log 2>&1
echo "models rc=$?"; grep -E "tessel [0-9.]+ ms|torch|speedup|ratio" $D/models.log | tail -24
R=""; for id in bert_base_b1_s128 llama_2048x4_b1_s128 resnet50_b1; do f=/tmp/tessel-real-models/onnx/$id.onnx; [[ -f $f ]] && R="$R $f"; done
[[ -n "$R" ]] && timeout $((585 - SECONDS)) python3 tmp_diag/ab.py $OLD $NEW $HW $D/ab_models.csv $((560 - SECONDS)) $R > $D/ab_models.txt 2>&1; cat $D/ab_models.txt
tar -C /tmp -czf $OUT/c64c.tgz c64c
