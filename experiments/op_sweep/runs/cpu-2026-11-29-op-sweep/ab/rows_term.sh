#!/bin/bash
# The interleaved A/B of the row-starts term (README.md): TESSEL_old and TESSEL_rows are the
# binaries of 281f002 and 304d51e, MODELS the sweep's model folder, CHANGED the list of the 47
# instances whose schedule changed (tessel explain differs).
H=/work/main/experiments/op_sweep/runs/cpu-2026-11-29-op-sweep/host-probe.json
for r in 1 2 3; do for m in $(cat CHANGED); do
  if [ $((r % 2)) = 1 ]; then order="old rows"; else order="rows old"; fi
  for v in $order; do t=$(TESSEL_$v run MODELS/$m.json --device cpu --hw $H --cache /tmp/ab3_$v --time 10 2>&1 | grep -oE 'median [0-9.]+' | cut -d' ' -f2); echo "$r $m $v $t"; done
done; done
