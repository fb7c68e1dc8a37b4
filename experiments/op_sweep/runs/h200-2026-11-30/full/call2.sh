#!/usr/bin/env bash
# Session 12, call 2 (same warm 2x H200): shard 1/2 of call 1 again (its results did not come back),
# as shards 1/4 (GPU 0) and 3/4 (GPU 1), reusing call 1's kernel and Inductor caches. One archive back.
set -u
export TESSEL_SOURCE_DIR=$PWD
D=$OUT/sweep1; mkdir -p $D; cp tmp_diag/calls2.sh $D/call.sh
cp -r /tmp/work1 /tmp/work3; cp -r /tmp/tcache1 /tmp/tcache3
for g in 0 1; do
  s=$((1 + 2*g)); w=$((1 + 2*g))
  ( export CUDA_VISIBLE_DEVICES=$g TESSEL_CACHE_DIR=/tmp/tcache$w
    timeout 330 python3 experiments/op_sweep/run_sweep.py --tessel dist/tessel/bin/tessel \
      --hw hw_specs/nvidia-h100-sxm.json --out $D/shard$s --work /tmp/work$w --shard $s/4 \
      --jobs 9 --torch-workers 5 --time-budget 280 > $D/shard$s.log 2>&1
    echo "shard $s/4 gpu $g rc=$? t=$SECONDS" >> $D/rc.txt ) &
done
wait
cat $D/rc.txt; tar -C $OUT -czf $OUT/sweep1.tgz sweep1 && rm -rf $D; ls -la $OUT
