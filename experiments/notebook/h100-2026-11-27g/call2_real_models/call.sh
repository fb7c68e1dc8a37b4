#!/usr/bin/env bash
# GPU call 2 (issue 23): real CNNs exported from torchvision after the box-tiled convolutions
# (ResNet-50, ConvNeXt-T, EfficientNet-B0, MobileNetV2 at batch 1 and 8), GPU time on both sides,
# every Tessel run checked against the interpreter first.
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
D=/tmp/c2; rm -rf $D; mkdir -p $D
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $D/nvidia-smi.csv
OUT=$D TESSEL_MODELS_ARGS="--only resnet50 convnext_tiny efficientnet_b0 mobilenet_v2 --skip-bundled --time-budget 480 --call-limit 560" TESSEL_MODELS_TIMEOUT=575 scripts/device_run models > $D/models.log 2>&1
echo "models rc=$?"; tail -5 $D/models.log
tar -C /tmp -czf $OUT/c2.tgz c2
python3 - <<'PY'
import csv,glob
for f in glob.glob('/tmp/c2/**/*.csv',recursive=True):
    if 'nvidia' in f: continue
    for r in csv.DictReader(open(f)):
        print(f"{r.get('id'):28s} ok={r.get('tessel_correct')} tessel={r.get('tessel_ms','')[:7]} compile={r.get('compile_ms','')[:7]} x={r.get('compile_over_tessel','')[:5]} {r.get('error','')[:80]}")
PY
