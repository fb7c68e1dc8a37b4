#!/bin/bash
# The bundled BERT-base layer with its 6 linear weights pruned to density 0.1 (tessel sparsify,
# block per weight chosen among 32, 64, 128), checked, then timed as the model picks and all dense
# in 3 interleaved rounds on this machine's CPU backend. From the repository root.
set -eu
T=${TESSEL:-build/default/tessel}; H=${HW:-experiments/sparse/runs/cpu-2026-11-29-sparse-b/host.json}
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
$T sparsify experiments/models/bert_base_layer.json --hw "$H" --density 0.1 -o "$W/bert_sparse.json"
$T explain "$W/bert_sparse.json" --hw "$H" | grep "^  kind "
for m in cost dense; do $T run "$W/bert_sparse.json" --device cpu --hw "$H" --check --sparse-kernels $m --cache "$W/cache" | grep -E "check:|MISMATCH"; done
for r in 1 2 3; do for m in cost dense; do
  echo -n "round $r $m: "; $T run "$W/bert_sparse.json" --device cpu --hw "$H" --time 20 --sparse-kernels $m --cache "$W/cache" | grep timed
done; done
