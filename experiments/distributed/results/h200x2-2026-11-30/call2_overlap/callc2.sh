#!/usr/bin/env bash
# Session 11, call 2 (2 GPUs): GPU tests of the ring-shift overlap, the side stream under graph
# capture, i64 semantics; then experiments/distributed/run_overlap.py.
set -u
D=/tmp/c2; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
xz -dc tmp_variants/tessel_tests.xz > dist/tessel/libexec/tessel_tests; chmod +x dist/tessel/libexec/tessel_tests
sed 's|libexec/tessel"|libexec/tessel_tests"|' dist/tessel/bin/tessel > dist/tessel/bin/tessel_tests; chmod +x dist/tessel/bin/tessel_tests
export TESSEL_SOURCE_DIR=$PWD NCCL_NVLS_ENABLE=0
export TESSEL_NCCL_LIBRARY=$(python3 -c "import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],'lib','libnccl.so.2'))")
export TESSEL_CACHE_DIR=/tmp/tcache
cp tmp_diag/callc2.sh $D/; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv > $D/nvidia-smi.csv; nvidia-smi topo -m > $D/topo.txt 2>&1
timeout 150 dist/tessel/bin/tessel_tests -tc="cuda distributed*,cuda run: i64*" > $D/tests.log 2>&1; trc=$?
echo "tests rc=$trc" | tee $D/tests_tail.txt; grep -E "^\[doctest\] (test cases|assertions|Status)" $D/tests.log | tee -a $D/tests_tail.txt; grep -B3 -A14 "ERROR" $D/tests.log | head -60
echo "t=$SECONDS"
timeout $((585 - SECONDS)) python3 experiments/distributed/run_overlap.py --tessel dist/tessel/bin/tessel --out $D/overlap \
  --hw2 hw_specs/nvidia-h200-x2.json --time-budget $((520 - SECONDS)) > $D/overlap.log 2>&1
echo "overlap rc=$?"; grep -vE "^(##|\`\`\`)" $D/overlap.log | head -60
tar -C /tmp -czf $OUT/c2.tgz c2
