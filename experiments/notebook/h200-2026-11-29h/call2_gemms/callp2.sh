#!/usr/bin/env bash
# GEMM micro-study: measured top-k over each shape's candidate tilings, a K sweep, cuBLAS beside, ncu details.
set -u
D=/tmp/p2; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD
T=dist/tessel/bin/tessel; HW=hw_specs/nvidia-h100-sxm.json
cp tmp_diag/callp2.sh $D/
timeout 60 python3 tmp_diag/torch_gm.py tmp_diag/gm > $D/torch.txt 2>&1; cat $D/torch.txt
for f in tmp_diag/gm/*.json; do
  id=$(basename $f .json)
  r=$(timeout 40 $T run $f --device cuda --hw $HW --check --time 50 --report $D/$id.report.json 2>&1 | grep -o 'median [0-9.]* ms')
  echo "$id tessel $r" | tee -a $D/tessel.txt
done
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for id in deit_proj deit_fc1 bert8_q; do
  timeout 60 $ncu --clock-control none --cache-control none --set full -k regex:tessel_ --csv --page details $T run tmp_diag/gm/$id.json --device cuda --hw $HW > $D/$id.ncu_full.csv 2>$D/$id.ncu.err
  python3 tmp_diag/ncu_digest.py $D/$id.ncu_full.csv | head -8
done
echo "t=$SECONDS"
for id in deit_proj deit_fc1 deit_fc2 deit_qkv bert8_q bert8_fc2 ksweep_k64 ksweep_k384; do
  [[ $SECONDS -lt 520 ]] || break
  timeout 90 $T schedule tmp_diag/gm/$id.json --hw $HW --tune 24 --cache $D/tcache -o $D/$id.tuned.json > $D/$id.tune.log 2>&1
  python3 - $D/$id.tuned.json <<'PY' | tee -a $D/tune.txt
import json,sys
s=json.load(open(sys.argv[1]))
for g in s.get("groups",[]):
    tr=g.get("trials") or []
    print("==", sys.argv[1].split("/")[-1], len(tr), "trials")
    for x in sorted(tr, key=lambda x: x.get("measured_s") or 9):
        print("   ", {k: v for k, v in x.items() if k in ("family","params","predicted_s","measured_s","failure")})
PY
done
tar -C /tmp -czf $OUT/p2.tgz p2
