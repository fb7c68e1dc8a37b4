#!/usr/bin/env bash
# Session 22, call 7 (1x H200): the dense wgmma kernel's "B shared by a cluster of two" form
# (cluster_m 2, TMA multicast) after the remote releases became CTA-scope arrives: each GEMM's
# default schedule against the same schedule with cluster_m 2 recorded, checked, then timed.
set -u
D=$OUT/c7; mkdir -p $D; cp dist/call7.sh $D/call.sh
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
T=$PWD/dist/tessel/bin/tessel; HW=$PWD/hw_specs/nvidia-h200.json
python3 experiments/sparse/run_sparse.py --write-models /tmp/m --nm-only --only-shapes llama7b bert > /dev/null 2>&1
for f in /tmp/m/*.kn.dense.json; do
  n=$(basename $f .kn.dense.json)
  $T schedule $f --hw $HW -o /tmp/$n.s.json > /dev/null 2>&1
  python3 - /tmp/$n.s.json /tmp/$n.c.json <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
def walk(o):
    if isinstance(o, dict):
        k = o.get("kernel")
        if isinstance(k, dict) and k.get("family") == "wgmma":
            p = k["params"]; p["cluster_m"] = 2; p["persistent"] = 1; p.pop("pingpong", None)
        for v in o.values(): walk(v)
    elif isinstance(o, list):
        for v in o: walk(v)
walk(s)
json.dump(s, open(sys.argv[2], "w"))
PY
  for v in s c; do
    echo "== $n $v $(grep -o '"block_n": [0-9]*' /tmp/$n.$v.json | head -1) $(grep -o '"cluster_m": [0-9]*' /tmp/$n.$v.json | head -1)"
    timeout 100 $T run $f --device cuda --hw $HW --schedule /tmp/$n.$v.json --check --time 30 2>&1 | grep -E "check:|median|rror" | cut -c1-160
  done
done | tee $D/out.txt
echo "t=$SECONDS" | tee -a $D/out.txt
tar -C $OUT -czf $OUT/c7.tgz c7
