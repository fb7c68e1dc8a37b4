#!/usr/bin/env bash
# Interleaved A/B: old = dist/tessel (HEAD before the model change), new = build/default/tessel.
cd /work/main
P=experiments/cpu_suite/runs/cpu-2026-11-25b/cpu-probe.json  # models: /tmp/cpu_<id>.json from workloads.cpu_suite() (README)
for w in ${WL:-conv_bn_relu gemm bert_ffn1 bert_layer}; do
  for r in 1 2 3; do
    for b in old new; do
      bin=dist/tessel/bin/tessel; [[ $b == new ]] && bin=build/default/tessel
      t=$($bin run /tmp/cpu_$w.json --device cpu --hw $P --time ${N:-20} --threads 2 --check 2>&1 | grep -o 'median [0-9.]* ms\|matches\|MISMATCH\|error' | tr '\n' ' ')
      echo "$w round $r $b: $t"
    done
  done
done
