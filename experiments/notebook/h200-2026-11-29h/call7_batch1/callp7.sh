#!/usr/bin/env bash
# Final: batch-1 fix of the attention views; checks, flash GPU tests, A/B old (bundle 83842ce) / new.
set -u
D=$OUT; mkdir -p /tmp/onnx
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
xz -dc tmp_variants/tessel.xz > dist/tessel/libexec/tessel_new; xz -dc tmp_variants/tessel_tests.xz > dist/tessel/libexec/tessel_tests
chmod +x dist/tessel/libexec/tessel_new dist/tessel/libexec/tessel_tests
sed 's|libexec/tessel"|libexec/tessel_new"|' dist/tessel/bin/tessel > dist/tessel/bin/tessel_new; chmod +x dist/tessel/bin/tessel_new
export TESSEL_SOURCE_DIR=$PWD
OLD=dist/tessel/bin/tessel; NEW=dist/tessel/bin/tessel_new; HW=hw_specs/nvidia-h100-sxm.json
IDS="deit_small_b1 vit_b_16_b1 deit_small_b8 vit_b_16_b8"
timeout 60 python3 tmp_diag/prof.py export /tmp/onnx $IDS > /tmp/export.log 2>&1; ls /tmp/onnx; echo "t=$SECONDS"
TESSEL_CACHE_DIR=/tmp/cache_tests timeout 60 dist/tessel/bin/tessel_tests -tc="cuda flash run: timm*,cuda flash run: both*" > /tmp/tests.log 2>&1; echo "tests rc=$?" | tee $D/tests_tail.txt; tail -3 /tmp/tests.log | tee -a $D/tests_tail.txt
for id in $IDS; do
  timeout 40 $NEW run /tmp/onnx/$id.onnx --device cuda --hw $HW --check 2>&1 | grep -o "relative L2 error [0-9.e-]*\|mismatch.*" | head -1 | sed "s/^/$id new /" | tee -a $D/check.txt
done; echo "t=$SECONDS"
timeout $((265 - SECONDS)) python3 tmp_diag/ab.py $OLD $NEW $HW $D/ab.csv $((245 - SECONDS)) /tmp/onnx/deit_small_b1.onnx /tmp/onnx/vit_b_16_b1.onnx /tmp/onnx/deit_small_b8.onnx /tmp/onnx/vit_b_16_b8.onnx > $D/ab.txt 2>&1; cat $D/ab.txt
