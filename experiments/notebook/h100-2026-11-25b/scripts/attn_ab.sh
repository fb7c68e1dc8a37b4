#!/usr/bin/env bash
# SCRATCH: packed score pairs A/B, GPU tests, decode read baselines.
set -u
cd "$(dirname "$0")/.."
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
T=dist/tessel/bin/tessel; S=hw_specs/nvidia-h100-sxm.json; A=scratch/attn.json
nvidia-smi --query-gpu=name --format=csv,noheader
echo "== tests"; timeout 300 dist/tessel/bin/tessel_tests -tc='cuda flash*' 2>&1 | tail -4
echo "== check packed"; timeout 120 $T run $A --device cuda --hw $S --check 2>&1 | grep -i "check" | tail -2
for round in 1 2 3; do
  for v in pack nopack; do
    if [[ $v == nopack ]]; then export TESSEL_DEBUG_NOPACK=1; else unset TESSEL_DEBUG_NOPACK; fi
    r=$(timeout 60 $T run $A --device cuda --hw $S --time 30 2>&1 | grep "timed" | tail -1)
    echo "round $round $v | $r"
  done
done
unset TESSEL_DEBUG_NOPACK
# (The run also tried the read baselines of decode_floor.sh here with /usr/bin/python3, which has
# no torch on the device machine: the traceback at the end of runs/attention_packed_ab.txt.
# decode_floor.sh runs them with the machine's python3.)
