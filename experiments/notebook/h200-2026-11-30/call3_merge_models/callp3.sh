#!/usr/bin/env bash
# Call 3: flash GPU tests (O stored through the heads' merge); old (b927ac7) / new A/B on four batch-8
# transformer models; real-model rows (batch 1, LLaMA, T5) against torch.compile with the new build.
set -u
D=/tmp/p3; mkdir -p $D /tmp/onnx
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
xz -dc tmp_variants/tessel.xz > dist/tessel/libexec/tessel_new; xz -dc tmp_variants/tessel_tests.xz > dist/tessel/libexec/tessel_tests
chmod +x dist/tessel/libexec/tessel_new dist/tessel/libexec/tessel_tests
sed 's|libexec/tessel"|libexec/tessel_new"|' dist/tessel/bin/tessel > dist/tessel/bin/tessel_new; chmod +x dist/tessel/bin/tessel_new
sed 's|libexec/tessel"|libexec/tessel_tests"|' dist/tessel/bin/tessel > dist/tessel/bin/tessel_tests; chmod +x dist/tessel/bin/tessel_tests
export TESSEL_SOURCE_DIR=$PWD
OLD=dist/tessel/bin/tessel; NEW=dist/tessel/bin/tessel_new; HW=hw_specs/nvidia-h100-sxm.json
cp tmp_diag/callp3.sh $D/; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv > $D/nvidia-smi.csv
IDS="deit_small_b8 vit_b_16_b8 bert_base_b8_s128 gpt2_b4_s128"
(timeout 120 python3 tmp_diag/prof.py export /tmp/onnx $IDS > $D/export.log 2>&1) &
TESSEL_CACHE_DIR=/tmp/cache_tests timeout 150 dist/tessel/bin/tessel_tests -tc="cuda flash run*,cuda flash: kernels*" > $D/tests.log 2>&1; echo "tests rc=$?" | tee $D/tests_tail.txt; tail -4 $D/tests.log | tee -a $D/tests_tail.txt; grep -B3 -A12 "ERROR" $D/tests.log | head -40
echo "t=$SECONDS"; wait; grep -v "^ *%\|^\[" $D/export.log | tail -5
for f in /tmp/onnx/*.onnx; do
  id=$(basename $f)
  r=$(TESSEL_CACHE_DIR=/tmp/cache_new timeout 60 $NEW run $f --device cuda --hw $HW --check 2>&1 | grep -o "relative L2 error [0-9.e-]*\|mismatch.*\|rror.*\|[0-9]* kernels" | head -2 | tr '\n' ' ')
  echo "$id new $r" | tee -a $D/check.txt
done; echo "t=$SECONDS"
timeout $((330 - SECONDS)) python3 tmp_diag/ab.py $OLD $NEW $HW $D/ab.csv $((320 - SECONDS)) /tmp/onnx/*.onnx > $D/ab.txt 2>&1; cat $D/ab.txt
echo "t=$SECONDS"
CASES="deit_small_b1 vit_b_16_b1 bert_base_b1_s128 llama_2048x4_b1_s128 t5_small_encoder_b8_s128"
timeout $((575 - SECONDS)) python3 experiments/real_models/run_real_models.py --tessel $NEW --hw $HW --out $D/real-models --skip-bundled \
  --only $CASES --warm-jobs 8 --warm-timeout 120 --time-budget $((560 - SECONDS)) > $D/models.log 2>&1
echo "models rc=$?"; grep -E "^[a-z_0-9]+ +[0-9x]+ |geomean|not run" $D/models.log | tail -12
tar -C /tmp -czf $OUT/p3.tgz p3
