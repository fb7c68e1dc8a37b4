#!/usr/bin/env bash
# Session 22, call 9 (1x H200): block-sparse weights on the wgmma kernel's persistent grid with
# 128 x 64 tiles (each tile walking its panel's K list) -- the block-sparse GPU tests, then
# run_sparse.py on LLaMA-7B and BERT GEMMs at 64 and 128 blocks, densities 0.3 / 0.1 / 0.05.
set -u
D=$OUT/c9; mkdir -p $D; cp dist/call9.sh $D/call.sh
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv > $D/nvidia-smi.csv
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD
TESSEL_CACHE_DIR=/tmp/tc timeout 150 dist/tessel/bin/tessel_tests -tc="cuda sparse*" > $D/tests.log 2>&1
echo "tests rc=$? t=$SECONDS" | tee -a $D/rc.txt
grep -E "^\[doctest\] (test cases|assertions|Status)|ERROR|FATAL|mismatch" $D/tests.log | head -20 | tee -a $D/rc.txt
tar -C $OUT -czf $OUT/c9.tgz c9
timeout $((560 - SECONDS)) python3 experiments/sparse/run_sparse.py --only-shapes llama7b.4096x4096 llama7b.4096x11008 bert.768x3072 \
  --blocks 64 128 --densities 0.3 0.1 0.05 --hw hw_specs/nvidia-h200.json --out $D/sparse --time-budget $((520 - SECONDS)) \
  --jobs 6 --interp-threads 4 > $D/sparse.log 2>&1
echo "sparse rc=$? t=$SECONDS" | tee -a $D/rc.txt
grep -E "^- " $D/sparse/report.md | cut -c1-400 | tee -a $D/rc.txt
rm -f $D/sparse/speedup.png
tar -C $OUT -czf $OUT/c9.tgz c9
