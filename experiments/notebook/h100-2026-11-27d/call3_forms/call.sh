#!/bin/bash
# Call 3: the wgmma GEMM kernel's forms with the staged epilogue side by side (to refit the cost
# model's epilogue terms): 16 GEMMs of the sweep (run_variants.py's default list) plus two few-tile
# ones, cooperative 128 / 256 and ping-pong, f16.
set -u
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
D=/tmp/c3; mkdir -p $D
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $D/nvidia-smi.csv
timeout 540 python3 experiments/wgmma_variants/run_variants.py --tessel dist/tessel/bin/tessel --out $D/variants --rounds 2 \
  --variants "coop128:block_n=128,stages=6,persistent=1,pingpong=-,cluster_m=-" "coop256:block_n=256,stages=4,persistent=1,pingpong=-,cluster_m=-" "pingpong:block_n=128,stages=6,persistent=1,pingpong=1,cluster_m=-" \
  > $D/variants.log 2>&1
echo "variants rc $?"; tail -24 $D/variants.log
rm -rf $D/variants/work
tar -C /tmp -czf $OUT/c3.tgz c3
