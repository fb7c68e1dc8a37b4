#!/usr/bin/env bash
# Call 3: the real models with the new build (192-wide wgmma tiles), against PyTorch eager and
# torch.compile; then, as time allows, old (bundle, HEAD) and new Tessel interleaved on the same
# ONNX files.
set -u
D=/tmp/c3; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
xz -dc tmp_variants/tessel.xz > dist/tessel/libexec/tessel_new; xz -dc tmp_variants/tessel_tests.xz > dist/tessel/libexec/tessel_tests
chmod +x dist/tessel/libexec/tessel_new dist/tessel/libexec/tessel_tests
sed 's|libexec/tessel"|libexec/tessel_new"|' dist/tessel/bin/tessel > dist/tessel/bin/tessel_new; chmod +x dist/tessel/bin/tessel_new
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv > $D/nvidia-smi.csv
date -u > $D/date.txt; cp tmp_diag/call3.sh $D/
export TESSEL_SOURCE_DIR=$PWD
OLD=dist/tessel/bin/tessel; NEW=dist/tessel/bin/tessel_new; HW=hw_specs/nvidia-h100-sxm.json
# the tensor-core GPU tests of the new build (192-wide tiles recorded in every form)
TESSEL_CACHE_DIR=/tmp/cache_tests timeout 120 dist/tessel/bin/tessel_tests -tc="cuda mma run: 192*,cuda mma run: the tensor-core variants*,cuda families*" > $D/tests.log 2>&1; echo "tests rc=$?" | tee -a $D/tests.log; tail -3 $D/tests.log
CASES="bert_base_b8_s128 bert_base_b1_s128 vit_b_16_b8 deit_small_b8 gpt2_b4_s128 llama_2048x4_b1_s128 t5_small_encoder_b8_s128 whisper_base_encoder_b1"
timeout 420 python3 experiments/real_models/run_real_models.py --tessel $NEW --hw $HW --out $D/real-models --skip-bundled \
  --only $CASES --warm-jobs 8 --warm-timeout 220 --time-budget 400 > $D/models.log 2>&1
echo "models rc=$?"; tail -30 $D/models.log
for r in 1 2; do
  for id in bert_base_b8_s128 vit_b_16_b8 deit_small_b8 t5_small_encoder_b8_s128; do
    m=/tmp/tessel-real-models/onnx/$id.onnx; [[ -f $m && $SECONDS -lt 560 ]] || continue
    o=$(TESSEL_CACHE_DIR=/tmp/cache_old timeout 40 $OLD run $m --device cuda --hw $HW --time 30 2>&1 | grep -o 'median [0-9.]* ms' | grep -o '[0-9.]*')
    n=$(timeout 40 $NEW run $m --device cuda --hw $HW --time 30 2>&1 | grep -o 'median [0-9.]* ms' | grep -o '[0-9.]*')
    echo "$r $id old $o new $n" | tee -a $D/ab_models.txt
  done
done
tar -C /tmp -czf $OUT/c3.tgz c3
