#!/usr/bin/env bash
# Session 12, call 1 (2x H200): the whole GPU op sweep at 3a71731, one shard per GPU, each with its
# own lock (the two GPUs time independently; each shard times one thing at a time on its GPU).
set -u
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD
D=$OUT/sweep; mkdir -p $D; cp tmp_diag/calls1.sh $D/call.sh
nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv > $D/nvidia-smi.csv
nproc > $D/nproc.txt
for s in 0 1; do
  ( export CUDA_VISIBLE_DEVICES=$s TESSEL_CACHE_DIR=/tmp/tcache$s
    timeout 575 python3 experiments/op_sweep/run_sweep.py --tessel dist/tessel/bin/tessel \
      --hw hw_specs/nvidia-h100-sxm.json --out $D/shard$s --work /tmp/work$s --shard $s/2 \
      --jobs 9 --torch-workers 5 --time-budget 520 > $D/shard$s.log 2>&1
    echo "shard $s rc=$? t=$SECONDS" >> $D/rc.txt ) &
done
wait
tail -3 $D/shard*.log
