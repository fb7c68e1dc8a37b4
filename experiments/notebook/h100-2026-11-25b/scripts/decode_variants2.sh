#!/usr/bin/env bash
# SCRATCH: gemm_decode: deeper pipelines at split 4 / 2.
set -u
cd "$(dirname "$0")/.."
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
T=dist/tessel/bin/tessel; S=hw_specs/nvidia-h100-sxm.json; M=scratch/decode.json
vars="base 64,32,8,2 64,32,6,2 64,32,12,2 64,64,6,2 64,64,8,2 32,32,8,1 32,32,16,1 32,64,8,1 64,32,16,2"
for v in $vars; do
  if [[ $v == base ]]; then unset TESSEL_DEBUG_MMA; else export TESSEL_DEBUG_MMA=$v; fi
  c=$(timeout 60 $T run $M --device cuda --hw $S --check 2>&1 | grep -i "check:" | tail -1 | cut -c1-60)
  k=$(ncu --cache-control none --metrics gpu__time_duration.sum $T run $M --device cuda --hw $S --time 5 2>&1 | grep gpu__time | awk '{print $3}' | tail -4 | tr '\n' ' ')
  echo "$v | $c | ncu us (L2 warm): $k"
done
for round in 1 2; do
  for v in $vars; do
    if [[ $v == base ]]; then unset TESSEL_DEBUG_MMA; else export TESSEL_DEBUG_MMA=$v; fi
    r=$(timeout 60 $T run $M --device cuda --hw $S --time 300 2>&1 | grep "timed" | tail -1 | cut -c1-45)
    g=$(TESSEL_CUDA_GRAPH=1 timeout 60 $T run $M --device cuda --hw $S --time 300 2>&1 | grep "timed" | tail -1 | cut -c1-45)
    echo "round $round $v | $r | graph: $g"
  done
done
