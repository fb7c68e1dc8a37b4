#!/usr/bin/env bash
# Call 1 (2026-11-29e): every real model on the current code, then ncu by kernel family on four transformers.
set -u
export OUT=${OUT:-device-out}
mkdir -p "$OUT"
cp tmp_call1.sh "$OUT/call.sh"
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_MODELS_ARGS="--skip-bundled --time-budget 360"
TESSEL_MODELS_TIMEOUT=450 scripts/device_run models
export TESSEL_FAMILIES="/tmp/tessel-real-models/onnx/bert_base_b8_s128.onnx /tmp/tessel-real-models/onnx/t5_small_encoder_b8_s128.onnx /tmp/tessel-real-models/onnx/whisper_base_encoder_b4.onnx /tmp/tessel-real-models/onnx/deit_small_b8.onnx"
ls /tmp/tessel-real-models/onnx/ > "$OUT/onnx_list.txt" 2>&1
timeout 110 scripts/device_run families
echo done
