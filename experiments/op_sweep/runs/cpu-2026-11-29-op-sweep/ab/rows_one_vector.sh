#!/bin/bash
# interleaved A/B: A = tessel_nounroll (97fd7f4, row starts 30 in code) with host-probe.json;
# B = tessel_ic1 (spatial rows one vector an iteration, row_start_cycles from the spec: 10) with host-probe-rows.json
HA=/work/main/experiments/op_sweep/runs/cpu-2026-11-29-op-sweep/host-probe.json; HB=/tmp/cab/host-probe-rows.json
for m in models/*.json; do id=$(basename $m .json)
  TESSEL_CACHE_DIR=/tmp/cab/ic_b /tmp/cs/tessel_ic1 run $m --hw $HB --device cpu --check > /dev/null 2>&1 || echo "CHECK FAIL $id"
  TESSEL_CACHE_DIR=/tmp/cab/ic_a /tmp/cs/tessel_nounroll run $m --hw $HA --device cpu > /dev/null 2>&1
done
for r in 1 2; do
  for m in models/*.json; do id=$(basename $m .json)
    a=$(TESSEL_CACHE_DIR=/tmp/cab/ic_a /tmp/cs/tessel_nounroll run $m --hw $HA --device cpu --time 10 2>&1 | grep -o 'median [0-9.]* ms' | grep -o '[0-9.]*')
    b=$(TESSEL_CACHE_DIR=/tmp/cab/ic_b /tmp/cs/tessel_ic1 run $m --hw $HB --device cpu --time 10 2>&1 | grep -o 'median [0-9.]* ms' | grep -o '[0-9.]*')
    echo "$r $id $a $b"
  done
done
