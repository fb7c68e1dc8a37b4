#!/usr/bin/env bash
# Session 22, call 4 (1x H200): the 2:4 wgmma.sp kernel with two-block clusters sharing X (multicast), the persistent grid clamped to the clusters the device holds at once, persistent, its epilogue through
# transposed slabs -- the 2:4 GPU tests, the f16 BERT-base layer with 2:4 weights, then
# run_sparse.py --nm-only on four linear layers in both weight layouts.
set -u
D=$OUT/c4; mkdir -p $D; cp dist/call4.sh $D/call.sh
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv > $D/nvidia-smi.csv
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD
T=$PWD/dist/tessel/bin/tessel; HW=$PWD/hw_specs/nvidia-h200.json
TESSEL_CACHE_DIR=/tmp/tc timeout 200 dist/tessel/bin/tessel_tests -tc="cuda nm sparse*" > $D/tests.log 2>&1
echo "tests rc=$? t=$SECONDS" | tee -a $D/rc.txt
grep -E "^\[doctest\] (test cases|assertions|Status)|ERROR|FATAL|error|mismatch" $D/tests.log | head -30 | tee -a $D/rc.txt
mkdir -p $D/bert_layer; M=dist/bert_nm16.json
for mode in block_sparse cost dense; do echo "== $mode"; TESSEL_CACHE_DIR=/tmp/tc timeout 100 $T run $M --device cuda --hw $HW --sparse-kernels $mode --check --time 30 2>&1 | grep -E "check:|MISMATCH|median|error"; done | tee $D/bert_layer/out.txt
TESSEL_CACHE_DIR=/tmp/tc $T explain $M --hw $HW --sparse-kernels block_sparse 2>&1 | grep -E "kind |family" > $D/bert_layer/kinds.txt
echo "bert t=$SECONDS" | tee -a $D/rc.txt
tar -C $OUT -czf $OUT/c4.tgz c4
timeout $((570 - SECONDS)) python3 experiments/sparse/run_sparse.py --nm-only --weight-layout both \
  --only-shapes llama7b.4096x4096 llama7b.4096x11008 llama7b.11008x4096 bert.768x3072 bert.3072x768 \
  --hw hw_specs/nvidia-h200.json --out $D/sparse --time-budget $((540 - SECONDS)) --jobs 6 --interp-threads 4 > $D/sparse.log 2>&1
echo "sparse rc=$? t=$SECONDS" | tee -a $D/rc.txt
grep -E "^- 2:4|^2:4:" $D/sparse/report.md | tee -a $D/rc.txt
rm -f $D/sparse/speedup.png
tar -C $OUT -czf $OUT/c4.tgz c4
