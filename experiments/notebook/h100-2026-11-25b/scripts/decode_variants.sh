#!/usr/bin/env bash
# SCRATCH: gemm_decode tile variants, interleaved.
set -u
cd "$(dirname "$0")/.."
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
T=dist/tessel/bin/tessel; S=hw_specs/nvidia-h100-sxm.json; M=scratch/decode.json
nvidia-smi --query-gpu=name --format=csv,noheader
vars="base 128,32,4,8 128,64,4,8 256,32,4,8 256,64,4,8 256,32,8,8 128,32,8,8 256,64,3,8 64,64,4,8 128,64,4,4 256,64,4,4"
for v in $vars; do
  if [[ $v == base ]]; then unset TESSEL_DEBUG_MMA; else export TESSEL_DEBUG_MMA=$v; fi
  echo "== check $v"; timeout 60 $T run $M --device cuda --hw $S --check 2>&1 | grep -i "check\|error\|mismatch\|pass\|fail" | tail -2
done
for round in 1 2 3; do
  for v in $vars; do
    if [[ $v == base ]]; then unset TESSEL_DEBUG_MMA; else export TESSEL_DEBUG_MMA=$v; fi
    r=$(timeout 60 $T run $M --device cuda --hw $S --time 500 2>&1 | grep -i "median\|ms" | tail -1)
    g=$(TESSEL_CUDA_GRAPH=1 timeout 60 $T run $M --device cuda --hw $S --time 500 2>&1 | grep -i "median\|ms" | tail -1)
    echo "round $round $v | $r | graph: $g"
  done
done
