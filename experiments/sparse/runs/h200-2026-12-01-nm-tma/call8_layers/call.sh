#!/usr/bin/env bash
# Session 22, call 8 (1x H200): whole layers with 2:4 weights on the final 2:4 kernel --
# sparse_layers.py --pattern nm (BERT-base layer with 2:4 FFN weights and with every linear
# weight 2:4, LLaMA-7B MLP), each dense / as the model picks / all 2:4, checked, then timed.
set -u
D=$OUT/c8; mkdir -p $D; cp dist/call8.sh $D/call.sh
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv > $D/nvidia-smi.csv
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD
timeout 560 python3 experiments/sparse/sparse_layers.py --pattern nm --hw hw_specs/nvidia-h200.json --out $D/layers \
  --models bert_ffn bert_all llama_mlp --timeout 250 > $D/layers.log 2>&1
echo "layers rc=$? t=$SECONDS" | tee -a $D/rc.txt
cat $D/layers/layers.md 2>/dev/null | tail -8
tar -C $OUT -czf $OUT/c8.tgz c8
