#!/usr/bin/env bash
# GPU call 4 (issue 23/24): the wgmma epilogue priced by its value functions (an erf GELU fused
# into ConvNeXt-T's first MLP GEMM ran 93.4 us against 61.4 us apart, call 3): the op sweep's
# GEMM + bias + GELU instances (fused before, 2026-11-27e) and the exported CNNs again.
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
D=/tmp/c4; rm -rf $D; mkdir -p $D
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $D/nvidia-smi.csv
ids="gemm.bert.ffn_up.m512.f16 gemm.bert.ffn_up.m4096.f16 gemm.bert.ffn_up.m16384.f16 gemm.gpt2.ffn_up.m1024.f16 gemm.gpt2.ffn_up.m8192.f16 gemm.vit_b16.ffn_up.m6304.f16 gemm.vit_b16.ffn_up.m197.f16 gemm.vit_l16.ffn_up.m6304.f16 gemm.whisper.ffn_up.m6000.f16 gemm.bert.ffn_up.m4096.bf16 gemm.gpt2.ffn_up.m8192.bf16 gemm.vit_l16.ffn_up.m197.bf16"
OUT=$D TESSEL_SWEEP_ARGS="--only $ids --time-budget 150" TESSEL_SWEEP_TIMEOUT=200 scripts/device_run sweep > $D/sweep.log 2>&1
echo "sweep rc=$?"
OUT=$D TESSEL_MODELS_ARGS="--only resnet50 convnext_tiny efficientnet_b0 --skip-bundled --time-budget 300 --call-limit 360" TESSEL_MODELS_TIMEOUT=370 scripts/device_run models > $D/models.log 2>&1
echo "models rc=$?"
tar -C /tmp -czf $OUT/c4.tgz c4
python3 - <<'PY'
import csv,glob
for f in glob.glob('/tmp/c4/**/*.csv',recursive=True):
    if 'nvidia' in f: continue
    for r in csv.DictReader(open(f)):
        if 'speedup_vs_best' in r:
            print(f"{r['id']:35s} ok={r['tessel_correct']} t={r['tessel_ms'][:7]} best={r['best_baseline_ms'][:7]} x={r['speedup_vs_best'][:5]} fam={r['families']}")
        else:
            print(f"{r['id']:28s} ok={r['tessel_correct']} tessel={r['tessel_ms'][:7]} compile={r['compile_ms'][:7]} x={r['compile_over_tessel'][:5]}")
PY
