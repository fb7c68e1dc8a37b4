#!/usr/bin/env bash
# B's prefetch distance as the schedule records it (pf0, 0f0a235): welder's schedule (pf0 = 4096)
# against the same schedule with pf0 = 0, three interleaved rounds on this VM (2 cores), the
# probed spec. The two models are y = x W with W [K, N] f32 (experiments/models/generate_models.py).
set -e
tessel=${TESSEL:-build/default/tessel}
D=$(dirname "$0")
$tessel hw probe -o /tmp/vm.json --quick
for r in 1 2 3; do
  for n in gemv_1x4096x4096_kn gemm_4x4096x11008_kn; do
    for v in schedule schedule_pf0_off; do
      echo "round $r $n $v $($tessel run $D/$n.json --device cpu --hw /tmp/vm.json --schedule $D/$n.$v.json --time 40 | grep -o 'median [0-9.]* ms')"
    done
  done
done
