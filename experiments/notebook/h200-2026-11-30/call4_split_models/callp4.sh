#!/usr/bin/env bash
# Call 4 (final): GPU tests of the K split's prefetched pairs; head (75a751c) / split A/B on split-K
# GEMM models; the real-model rows against eager and torch.compile with the split build (head's if the tests fail).
set -u
D=/tmp/p4; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
for v in head split; do xz -dc tmp_variants/tessel_$v.xz > dist/tessel/libexec/tessel_$v; chmod +x dist/tessel/libexec/tessel_$v
  sed "s|libexec/tessel\"|libexec/tessel_$v\"|" dist/tessel/bin/tessel > dist/tessel/bin/tessel_$v; chmod +x dist/tessel/bin/tessel_$v; done
xz -dc tmp_variants/tessel_tests.xz > dist/tessel/libexec/tessel_tests; chmod +x dist/tessel/libexec/tessel_tests
sed 's|libexec/tessel"|libexec/tessel_tests"|' dist/tessel/bin/tessel > dist/tessel/bin/tessel_tests; chmod +x dist/tessel/bin/tessel_tests
export TESSEL_SOURCE_DIR=$PWD
HEAD=dist/tessel/bin/tessel_head; SPLIT=dist/tessel/bin/tessel_split; HW=hw_specs/nvidia-h100-sxm.json
cp tmp_diag/callp4.sh $D/; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv > $D/nvidia-smi.csv
TESSEL_CACHE_DIR=/tmp/cache_tests timeout 100 dist/tessel/bin/tessel_tests -tc="cuda mma run: 64-row*,cuda mma run: the wgmma kernel's K split*,cuda mma run: the wgmma epilogue*" > $D/tests.log 2>&1; trc=$?
echo "tests rc=$trc" | tee $D/tests_tail.txt; tail -4 $D/tests.log | tee -a $D/tests_tail.txt; grep -B3 -A12 "ERROR" $D/tests.log | head -30
echo "t=$SECONDS"
GM="tmp_diag/gm/deit_fc2.json tmp_diag/gm/bert8_fc2.json tmp_diag/gm/gpt2_fc2.json tmp_diag/gm/llama_o.json tmp_diag/gm/llama_down.json"
for f in $GM; do r=$(TESSEL_CACHE_DIR=/tmp/cache_new timeout 40 $SPLIT run $f --device cuda --hw $HW --check 2>&1 | grep -o "relative L2 error [0-9.e-]*\|mismatch.*\|rror.*" | head -1); echo "$(basename $f) split $r" | tee -a $D/check.txt; done
timeout 100 python3 tmp_diag/ab.py $HEAD $SPLIT $HW $D/ab.csv 90 $GM > $D/ab.txt 2>&1; cat $D/ab.txt
echo "t=$SECONDS"
T=$SPLIT; [[ $trc -eq 0 ]] || T=$HEAD; echo "table with $T" | tee $D/table_binary.txt
CASES="deit_small_b8 vit_b_16_b8 bert_base_b8_s128 gpt2_b4_s128 llama_2048x4_b1_s128 whisper_base_encoder_b1"
timeout $((480 - SECONDS)) python3 experiments/real_models/run_real_models.py --tessel $T --hw $HW --out $D/real-models --skip-bundled \
  --only $CASES --warm-jobs 8 --warm-timeout 110 --time-budget $((465 - SECONDS)) > $D/models.log 2>&1
echo "models rc=$?"; grep -E "^[a-z_0-9]+ +[0-9x]+ |geomean|not run" $D/models.log | tail -12
tar -C /tmp -czf $OUT/p4.tgz p4
