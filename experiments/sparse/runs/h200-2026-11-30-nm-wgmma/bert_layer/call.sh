#!/usr/bin/env bash
# Session 17, call 10 (1x H200): a real model with 2:4 weights: the f16 BERT-base layer
# (experiments/models/bert_base_layer.json in f16) after `tessel sparsify --pattern nm`, every
# linear weight on the 2:4 kernel (forced) and as the model picks, checked against the interpreter.
D=$OUT/q10; mkdir -p $D; cp tmp_diag/nm/call10.sh $D/call.sh
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD
T=$PWD/dist/tessel/bin/tessel; HW=$PWD/hw_specs/nvidia-h200.json; M=tmp_diag/nm/bert/bert_nm16.json
for mode in block_sparse cost; do echo "== $mode"; TESSEL_CACHE_DIR=/tmp/tc timeout 200 $T run $M --device cuda --hw $HW --sparse-kernels $mode --check --time 30 2>&1 | grep -E "check:|MISMATCH|median|error"; done | tee $D/out.txt
TESSEL_CACHE_DIR=/tmp/tc $T explain $M --hw $HW --sparse-kernels block_sparse 2>&1 | grep -E "kind " > $D/kinds.txt
