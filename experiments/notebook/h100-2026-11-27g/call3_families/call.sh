#!/usr/bin/env bash
# GPU call 3 (issue 23): per-kernel GPU time (ncu) of ConvNeXt-T and MobileNetV2 exported from
# torchvision, after the box-tiled convolutions (compare experiments/notebook/h100-2026-11-26e/after).
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
D=/tmp/c3; rm -rf $D; mkdir -p $D
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $D/nvidia-smi.csv
OUT=$D TESSEL_MODELS_ARGS="--only convnext_tiny mobilenet_v2 --skip-bundled --no-torch-timing --time-budget 200 --call-limit 260" TESSEL_MODELS_TIMEOUT=270 scripts/device_run models > $D/models.log 2>&1
echo "models rc=$?"; ls /tmp/tessel-real-models/onnx/
OUT=$D TESSEL_FAMILIES="$(ls /tmp/tessel-real-models/onnx/convnext_tiny*8*.onnx /tmp/tessel-real-models/onnx/mobilenet_v2*8*.onnx | tr '\n' ' ')" scripts/device_run families > $D/families.log 2>&1
echo "families rc=$?"
tar -C /tmp -czf $OUT/c3.tgz c3
head -60 $D/families/summary.txt
