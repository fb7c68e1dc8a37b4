#!/usr/bin/env bash
# Interleaved A/B on this VM: two f16 op-sweep GEMMs (models written by run_fidelity.py into
# /tmp/fidcpuw/models) with welder's schedule as chosen (the micro-kernel) and the same schedule
# with the group forced onto loop nests (what every f16 contraction ran as before 49d30e4).
T=build/default/tessel
for m in gemm.llama7b.o.m1.f16 gemm.bert.pooler.m32.f16; do
  f=/tmp/fidcpuw/models/$m.json
  $T schedule $f --hw /tmp/host.json -o /tmp/$m.mk.json > /dev/null
  python3 -c "
import json; d=json.load(open('/tmp/$m.mk.json'))
for g in d['groups']:
    if g.get('kernel',{}).get('family')=='microkernel': g['kernel']={'family':'loops'}
json.dump(d,open('/tmp/$m.loops.json','w'))"
done
for r in 1 2 3; do for m in gemm.llama7b.o.m1.f16 gemm.bert.pooler.m32.f16; do for v in mk loops; do
  echo -n "$r $m $v: "
  $T run /tmp/fidcpuw/models/$m.json --device cpu --hw /tmp/host.json --schedule /tmp/$m.$v.json --time 10 | grep timed
done; done; done
