#!/usr/bin/env bash
# Call 2: GPU tests of the prefetched epilogue and the fast erf; old (b927ac7) / new A/B on GEMM models and real models.
set -u
D=/tmp/p2; mkdir -p $D /tmp/onnx
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
xz -dc tmp_variants/tessel.xz > dist/tessel/libexec/tessel_new; xz -dc tmp_variants/tessel_tests.xz > dist/tessel/libexec/tessel_tests
chmod +x dist/tessel/libexec/tessel_new dist/tessel/libexec/tessel_tests
sed 's|libexec/tessel"|libexec/tessel_new"|' dist/tessel/bin/tessel > dist/tessel/bin/tessel_new; chmod +x dist/tessel/bin/tessel_new
sed 's|libexec/tessel"|libexec/tessel_tests"|' dist/tessel/bin/tessel > dist/tessel/bin/tessel_tests; chmod +x dist/tessel/bin/tessel_tests
export TESSEL_SOURCE_DIR=$PWD
OLD=dist/tessel/bin/tessel; NEW=dist/tessel/bin/tessel_new; HW=hw_specs/nvidia-h100-sxm.json
cp tmp_diag/callp2.sh $D/; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv > $D/nvidia-smi.csv
IDS="deit_small_b8 vit_b_16_b8 bert_base_b8_s128 gpt2_b4_s128"
(timeout 120 python3 tmp_diag/prof.py export /tmp/onnx $IDS > $D/export.log 2>&1) &
TESSEL_CACHE_DIR=/tmp/cache_tests timeout 240 dist/tessel/bin/tessel_tests -tc="cuda codegen: 1 + erf*,cuda mma run: the wgmma epilogue*,cuda mma run: 64-row*,cuda mma run: the ping-pong*,cuda mma run: 192-wide*,cuda mma run: tensor-core kernels match*" > $D/tests.log 2>&1; echo "tests rc=$?" | tee $D/tests_tail.txt; tail -4 $D/tests.log | tee -a $D/tests_tail.txt; grep -B3 -A12 "ERROR\|FAILED" $D/tests.log | head -60
echo "t=$SECONDS"; wait; cat $D/export.log
for f in tmp_diag/gm/*.json /tmp/onnx/*.onnx; do
  id=$(basename $f)
  r=$(TESSEL_CACHE_DIR=/tmp/cache_new timeout 60 $NEW run $f --device cuda --hw $HW --check 2>&1 | grep -o "relative L2 error [0-9.e-]*\|mismatch.*\|rror.*" | head -1)
  echo "$id new $r" | tee -a $D/check.txt
done; echo "t=$SECONDS"
timeout $((570 - SECONDS)) python3 tmp_diag/ab.py $OLD $NEW $HW $D/ab.csv $((550 - SECONDS)) /tmp/onnx/*.onnx tmp_diag/gm/*.json > $D/ab.txt 2>&1; cat $D/ab.txt
echo "t=$SECONDS"
tar -C /tmp -czf $OUT/p2.tgz p2
