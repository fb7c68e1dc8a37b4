set -u
D=/tmp/c3; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
xz -dc tmp_variants/tessel.xz > dist/tessel/libexec/tessel; xz -dc tmp_variants/tessel_tests.xz > dist/tessel/libexec/tessel_tests
chmod +x dist/tessel/libexec/tessel dist/tessel/libexec/tessel_tests
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv > $D/nvidia-smi.csv
date -u > $D/date.txt
cp tmp_call3.sh $D/call.sh
export TESSEL_SOURCE_DIR=$PWD
# 1. the row kernels on the GPU, with the integer rows (infinities counted, i64 maxima)
timeout 90 dist/tessel/bin/tessel_tests -tc="cuda row run*" > $D/tests.log 2>&1; echo "tests rc=$?" >> $D/tests.log; tail -4 $D/tests.log
# 2. every real model, Tessel against PyTorch eager and torch.compile
OUT=$D TESSEL_MODELS_ARGS="--skip-bundled --time-budget 300" TESSEL_MODELS_TIMEOUT=390 scripts/device_run models > $D/models.log 2>&1
echo "models rc=$?"; tail -40 $D/models.log
# 3. GPU time by kernel family of three transformers
ls /tmp/tessel-real-models/onnx/ > $D/onnx_list.txt 2>&1
OUT=$D TESSEL_FAMILIES="/tmp/tessel-real-models/onnx/bert_base_b8_s128.onnx /tmp/tessel-real-models/onnx/t5_small_encoder_b8_s128.onnx /tmp/tessel-real-models/onnx/deit_small_b8.onnx" timeout 60 scripts/device_run families > $D/families.log 2>&1
echo "families rc=$?"; grep -A8 "^== " $D/families/summary.txt | head -40
tar -C /tmp -czf $OUT/c3.tgz c3
