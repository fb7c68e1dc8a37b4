#!/usr/bin/env bash
# Views and scales around attention + the tile rule: GPU tests, checks, A/B (old = bundle 83842ce), torch.compile beside.
set -u
D=$OUT; mkdir -p /tmp/onnx
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
xz -dc tmp_variants/tessel.xz > dist/tessel/libexec/tessel_new; xz -dc tmp_variants/tessel_tests.xz > dist/tessel/libexec/tessel_tests
chmod +x dist/tessel/libexec/tessel_new dist/tessel/libexec/tessel_tests
sed 's|libexec/tessel"|libexec/tessel_new"|' dist/tessel/bin/tessel > dist/tessel/bin/tessel_new; chmod +x dist/tessel/bin/tessel_new
export TESSEL_SOURCE_DIR=$PWD
OLD=dist/tessel/bin/tessel; NEW=dist/tessel/bin/tessel_new; HW=hw_specs/nvidia-h100-sxm.json
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv > $D/nvidia-smi.csv
IDS="deit_small_b8 vit_b_16_b8 bert_base_b8_s128 deit_small_b1 vit_b_16_b1"
timeout 100 python3 tmp_diag/prof.py export /tmp/onnx $IDS > /tmp/export.log 2>&1; ls /tmp/onnx
TESSEL_CACHE_DIR=/tmp/cache_tests timeout 150 dist/tessel/bin/tessel_tests -tc="cuda flash run*,cuda mma run: 64-row*" > /tmp/tests.log 2>&1; echo "tests rc=$?" | tee -a /tmp/tests.log; tail -3 /tmp/tests.log; tail -4 /tmp/tests.log > $D/tests_tail.txt; grep -B3 -A8 "ERROR" /tmp/tests.log | head -60 >> $D/tests_tail.txt
for id in $IDS; do
  $NEW compile /tmp/onnx/$id.onnx --device cuda --hw $HW --emit cuda -o /tmp/k_$id 2>&1 | sed -n 2,3p > /tmp/c.txt; head -c 600 /tmp/c.txt
  timeout 120 $NEW run /tmp/onnx/$id.onnx --device cuda --hw $HW --check 2>&1 | grep -o "relative L2 error [0-9.e-]*\|mismatch.*" | head -1 | sed "s/^/$id new /" | tee -a $D/check.txt
done
timeout 200 python3 tmp_diag/ab.py $OLD $NEW $HW $D/ab.csv 180 /tmp/onnx/deit_small_b8.onnx /tmp/onnx/vit_b_16_b8.onnx /tmp/onnx/bert_base_b8_s128.onnx /tmp/onnx/deit_small_b1.onnx /tmp/onnx/vit_b_16_b1.onnx > $D/ab.txt 2>&1; cat $D/ab.txt
timeout $((585 - SECONDS)) python3 tmp_diag/prof.py profile /tmp/prof $IDS > $D/torch.txt 2>&1; grep "torch.compile graph" $D/torch.txt
