#!/usr/bin/env bash
# Profile call: per-kernel GPU time of Tessel (ncu, warm caches, clocks free) and torch.compile
# (torch.profiler) on the transformers that trail.
set -u
D=/tmp/p1; mkdir -p $D/onnx
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv > $D/nvidia-smi.csv
date -u > $D/date.txt; cp tmp_diag/callp1.sh tmp_diag/prof.py $D/
export TESSEL_SOURCE_DIR=$PWD
T=dist/tessel/bin/tessel; HW=hw_specs/nvidia-h100-sxm.json
IDS="deit_small_b8 vit_b_16_b8 llama_2048x4_b1_s128 t5_small_encoder_b8_s128 bert_base_b8_s128"
timeout 150 python3 tmp_diag/prof.py export $D/onnx $IDS > $D/export.log 2>&1; tail -5 $D/export.log
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for id in $IDS; do
  m=$D/onnx/$id.onnx; [[ -f $m ]] || continue
  $T compile $m --device cuda --hw $HW --emit cuda -o $D/k/$id > $D/$id.compile.txt 2>&1
  timeout 100 $T run $m --device cuda --hw $HW --check --time 30 > $D/$id.run.txt 2>&1; grep -i "median\|check\|mismatch" $D/$id.run.txt | head -3
  timeout 100 $ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv $T run $m --device cuda --hw $HW > $D/$id.ncu.csv 2> $D/$id.ncu.err
  python3 scripts/kernel_profile.py $D/k/$id/manifest.json $D/$id.ncu.csv --top 40 > $D/$id.tessel.txt 2>&1; head -12 $D/$id.tessel.txt
  echo "t=$SECONDS"
done
timeout $((580 - SECONDS)) python3 tmp_diag/prof.py profile $D $IDS > $D/profile.log 2>&1; tail -8 $D/profile.log
rm -rf $D/onnx
tar -C /tmp -czf $OUT/p1.tgz p1
