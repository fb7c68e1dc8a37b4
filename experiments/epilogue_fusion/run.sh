#!/usr/bin/env bash
# A GEMM + bias followed by an erf GELU, with the GELU fused into the wgmma kernel's epilogue or
# kept apart as a vector kernel: both schedules replayed (--schedule), checked against the
# interpreter, GPU time (CUDA-graph replays timed with events, L2 warm). Three graphs:
# ConvNeXt-T's first MLP GEMM ([8,56,56,96] x [96,384]) with the GELU as ONNX exporters leave it
# (Div, Erf, Add, Mul, Mul with scalar weights: decomposed.json) and as one Gelu op
# (gelu_op.json), and ViT-B/16's FFN up at 32 images ([6304,768] x [768,3072], vit_gelu_op.json).
# The schedules were written by `tessel schedule --policy welder` with the epilogue priced by its
# value functions (apart) and without (fused). Usage: run.sh TESSEL OUT_CSV
set -uo pipefail
tessel=${1:-dist/tessel/bin/tessel}
out=${2:-epilogue_fusion.csv}
here=$(dirname "$0")
echo "model,schedule,median_ms,check" > "$out"
for m in decomposed gelu_op vit_gelu_op; do
  for v in fused apart; do
    log=$("$tessel" run "$here/$m.json" --device cuda --hw hw_specs/nvidia-h100-sxm.json --schedule "$here/$m.$v.schedule.json" \
      --check --time 50 2>&1)
    ms=$(grep -oE "median [0-9.]+ ms" <<< "$log" | grep -oE "[0-9.]+" | head -1)
    ok=$(grep -qi "check.*pass\|matches\|rel" <<< "$log" && echo pass || echo "?")
    echo "$m,$v,${ms:-NA},$ok" | tee -a "$out"
    echo "$log" | tail -4
  done
done
