#!/usr/bin/env bash
# Session 11, call 1: GPU tests of the review fixes and i64 semantics; the CNN rows (and the two
# weakest transformer rows) of the real-model suite against torch.compile with bead4e7's build.
set -u
D=/tmp/c1; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
xz -dc tmp_variants/tessel_tests.xz > dist/tessel/libexec/tessel_tests; chmod +x dist/tessel/libexec/tessel_tests
sed 's|libexec/tessel"|libexec/tessel_tests"|' dist/tessel/bin/tessel > dist/tessel/bin/tessel_tests; chmod +x dist/tessel/bin/tessel_tests
export TESSEL_SOURCE_DIR=$PWD
T=dist/tessel/bin/tessel; HW=hw_specs/nvidia-h100-sxm.json
cp tmp_diag/callc1.sh $D/; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv > $D/nvidia-smi.csv
TESSEL_CACHE_DIR=/tmp/cache_tests timeout 120 dist/tessel/bin/tessel_tests -tc="cuda run:*,cuda flash run: a schedule whose*" > $D/tests.log 2>&1; trc=$?
echo "tests rc=$trc" | tee $D/tests_tail.txt; tail -4 $D/tests.log | tee -a $D/tests_tail.txt; grep -B3 -A14 "ERROR" $D/tests.log | head -60
echo "t=$SECONDS"
CASES="resnet50_b1 resnet50_b8 mobilenet_v2_b1 mobilenet_v2_b8 efficientnet_b0_b1 efficientnet_b0_b8 convnext_tiny_b1 convnext_tiny_b8 resnext50_b1 resnext50_b8"
timeout $((575 - SECONDS)) python3 experiments/real_models/run_real_models.py --tessel $T --hw $HW --out $D/real-models --skip-bundled \
  --only $CASES --warm-jobs 10 --warm-timeout 150 --time-budget $((560 - SECONDS)) > $D/models.log 2>&1
echo "models rc=$?"; grep -E "^[a-z_0-9]+ +[0-9x]+ |geomean|not run" $D/models.log | tail -14
tar -C /tmp -czf $OUT/c1.tgz c1
