#!/usr/bin/env bash
# Session 17, call 8 (1x H200): the 2:4 wgmma.sp kernel with the K loop in pairs of tiles (metadata registers pinned, no branch): small
# models (one and several K tiles), the GPU tests, then run_sparse.py --nm-only, both layouts.
set -u
D=$OUT/q8; mkdir -p $D; cp tmp_diag/nm/call8.sh $D/call.sh
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv > $D/nvidia-smi.csv
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD
T=$PWD/dist/tessel/bin/tessel; HW=$PWD/hw_specs/nvidia-h200.json
(cd tmp_diag/nm/m
for f in t128_64_128 t128_512_128; do echo "== $f"; TESSEL_CACHE_DIR=/tmp/tc timeout 60 $T run $f.json --device cuda --hw $HW --schedule s128.json --check 2>&1 | grep -iE "check:|MISMATCH|error" | head -3; done
for f in t256_512_256; do echo "== $f"; TESSEL_CACHE_DIR=/tmp/tc timeout 60 $T run $f.json --device cuda --hw $HW --schedule s256.json --check 2>&1 | grep -iE "check:|MISMATCH|error" | head -3; done) | tee $D/small.txt
TESSEL_CACHE_DIR=/tmp/tc timeout 200 dist/tessel/bin/tessel_tests -tc="cuda nm sparse*" > $D/tests.log 2>&1
echo "tests rc=$? t=$SECONDS" | tee -a $D/rc.txt
grep -E "^\[doctest\] (test cases|assertions|Status)|ERROR|FATAL|error" $D/tests.log | head -30 | tee -a $D/rc.txt
tar -C $OUT -czf $OUT/q8.tgz q8
timeout $((570 - SECONDS)) python3 experiments/sparse/run_sparse.py --nm-only --weight-layout both \
  --only-shapes llama7b.4096x4096 llama7b.4096x11008 llama7b.11008x4096 bert.768x3072 \
  --hw hw_specs/nvidia-h200.json --out $D/sparse --time-budget $((540 - SECONDS)) --jobs 6 --interp-threads 4 > $D/sparse.log 2>&1
echo "sparse rc=$? t=$SECONDS" | tee -a $D/rc.txt
grep -E "^- 2:4|^2:4:" $D/sparse/report.md | tee -a $D/rc.txt
tar -C $OUT -czf $OUT/q8.tgz q8
