#!/usr/bin/env bash
# Cost-model projections: the plans `tessel shard` chooses for the LLaMA-7B MLP (M = 8192 tokens,
# f16) and a LLaMA-7B decoder block on 2, 8, 64 and 1,024 H100s (hw_specs/: a pair, a DGX H100,
# 128 DGX nodes on InfiniBand), with and without nnScaler-style pins, and their predicted step
# times. Nothing runs on a GPU: these are the model's predictions (docs/distributed.md).
#
#   experiments/distributed/projections.sh [TESSEL] > experiments/distributed/projections.md
set -euo pipefail
cd "$(dirname "$0")/../.."
tessel=$(realpath "${1:-build/default/tessel}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -c "
import json, sys
sys.path.insert(0, 'experiments/distributed')
import run_tp
json.dump(run_tp.mlp_model(8192), open('$work/mlp.json', 'w'))
"
echo "# Cost-model projections (no GPU; \`$0\`)"
echo
echo "Plans and predicted step times from \`tessel shard\` ($("$tessel" version | head -1))."
run() {
  local model=$1 spec=$2 mesh=$3 pins=${4:-}
  echo
  echo "## $(basename "$model" .json) on $spec, mesh $mesh${pins:+, pins \`$pins\`}"
  echo
  echo '```'
  "$tessel" shard "$model" --hw "hw_specs/$spec" --mesh "$mesh" ${pins:+--shard "$pins"} | grep -v '^  node\|^  input\|^  output'
  echo '```'
}
mlp=$work/mlp.json
block=experiments/models/llama_decoder_block.json
run "$mlp" nvidia-h100-sxm.json 1
run "$mlp" nvidia-h100-sxm-x2.json 2
run "$mlp" nvidia-h100-sxm-x2.json 2 "gate_w=S1 up_w=S1 down_w=S0"
run "$mlp" nvidia-dgx-h100.json 8
run "$mlp" nvidia-dgx-h100.json 8 "x=S0 y=S0"
run "$mlp" nvidia-dgx-h100.json 8 "gate_w=S1 up_w=S1 down_w=S0"
run "$mlp" nvidia-h100-cluster-1024.json dp=8,tp=8 "x=S0,R y=S0,R"
run "$mlp" nvidia-h100-cluster-1024.json dp=128,tp=8 "x=S0,R y=S0,R"
run "$mlp" nvidia-h100-cluster-1024.json dp=128,tp=8 "x=S0,R y=S0,R gate_w=R,S1 up_w=R,S1 down_w=R,S0"
run "$block" nvidia-h100-sxm-x2.json 2
run "$block" nvidia-dgx-h100.json 8
run "$block" nvidia-dgx-h100.json 8 "attn_q_w=S1 attn_k_w=S1 attn_v_w=S1 attn_o_w=S0 mlp_gate_w=S1 mlp_up_w=S1 mlp_down_w=S0"
