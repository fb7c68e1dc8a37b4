#!/usr/bin/env bash
# Call 4: real models with the final build (64-row blocks: one wave, at most 20 K tiles a block, a
# split's clusters on at most 3/4 of the SMs), against PyTorch eager and torch.compile.
set -u
D=/tmp/c64d; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
xz -dc tmp_variants/tessel.xz > dist/tessel/libexec/tessel_x; chmod +x dist/tessel/libexec/tessel_x
sed 's|libexec/tessel"|libexec/tessel_x"|' dist/tessel/bin/tessel > dist/tessel/bin/tessel_new; chmod +x dist/tessel/bin/tessel_new
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv > $D/nvidia-smi.csv
date -u > $D/date.txt; cp tmp_diag/call64d.sh $D/
export TESSEL_SOURCE_DIR=$PWD
NEW=dist/tessel/bin/tessel_new; HW=hw_specs/nvidia-h100-sxm.json
CASES="llama_2048x4_b1_s128 bert_base_b8_s128 gpt2_b4_s128 vit_b_16_b8 deit_small_b8 efficientnet_b0_b8"
timeout 300 python3 experiments/real_models/run_real_models.py --tessel $NEW --hw $HW --out $D/real-models --skip-bundled \
  --only $CASES --warm-jobs 8 --warm-timeout 160 --time-budget 280 > $D/models.log 2>&1
echo "models rc=$?"; grep -E "tessel [0-9.]+ ms|^[a-z_0-9]+ +[0-9x]+ |geomean" $D/models.log | tail -16
tar -C /tmp -czf $OUT/c64d.tgz c64d
