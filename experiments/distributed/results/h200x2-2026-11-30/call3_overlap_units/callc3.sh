#!/usr/bin/env bash
# Session 11, call 3 (2 GPUs): the shift limited to the level's overlap_units (NCCL maxCTAs) and the
# pieces beside it scheduled for the SMs left; run_overlap.py with 16 (the spec) and 32 units.
set -u
D=/tmp/c3; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
xz -dc tmp_variants/tessel_tests.xz > dist/tessel/libexec/tessel_tests; chmod +x dist/tessel/libexec/tessel_tests
sed 's|libexec/tessel"|libexec/tessel_tests"|' dist/tessel/bin/tessel > dist/tessel/bin/tessel_tests; chmod +x dist/tessel/bin/tessel_tests
export TESSEL_SOURCE_DIR=$PWD NCCL_NVLS_ENABLE=0
export TESSEL_NCCL_LIBRARY=$(python3 -c "import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],'lib','libnccl.so.2'))")
export TESSEL_CACHE_DIR=/tmp/tcache
cp tmp_diag/callc3.sh $D/; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv > $D/nvidia-smi.csv
timeout 100 dist/tessel/bin/tessel_tests -tc="cuda distributed*" > $D/tests.log 2>&1; trc=$?
echo "tests rc=$trc" | tee $D/tests_tail.txt; grep -E "^\[doctest\] (test cases|assertions|Status)" $D/tests.log | tee -a $D/tests_tail.txt; grep -B3 -A14 "ERROR" $D/tests.log | head -40
echo "t=$SECONDS"
timeout $((400 - SECONDS)) python3 experiments/distributed/run_overlap.py --tessel dist/tessel/bin/tessel --out $D/overlap16 \
  --hw2 hw_specs/nvidia-h200-x2.json --m 2048 8192 16384 --mlp-m 8192 --time-budget $((330 - SECONDS)) > $D/overlap16.log 2>&1
echo "overlap16 rc=$? t=$SECONDS"; grep -E "^\| (ag|mlp)|picked" $D/overlap16/README.md
timeout $((575 - SECONDS)) python3 experiments/distributed/run_overlap.py --tessel dist/tessel/bin/tessel --out $D/overlap32 \
  --hw2 tmp_diag/h200x2_ou32.json --m 8192 16384 --mlp-m --rounds 1 --time-budget $((480 - SECONDS)) > $D/overlap32.log 2>&1
echo "overlap32 rc=$? t=$SECONDS"; grep -E "^\| (ag|mlp)|picked" $D/overlap32/README.md
tar -C /tmp -czf $OUT/c3.tgz c3
