set -u
D=/tmp/c2; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tessel-cuda-cache
cp tmp_call2.sh $D/call.sh
mkdir -p $D/m
python3 - <<'PY'
import sys
sys.path.insert(0, "experiments/op_sweep"); import instances as c
want = ["conv.mobilenetv2.pw_expand_24_144.b32.nhwc.f16", "gemm.dlrm.bot_13_512.m16384.f16", "gemm.sd_unet.attn_qkv_c320.m8192.f16", "gemm.bert.scores.b32s128.f16"]
for i in c.instances():
    if i.id in want:
        open("/tmp/c2/m/%s.json" % i.id, "w").write(c.gm.render(i.build().document()) + "\n")
PY
T=dist/tessel/bin/tessel; S=hw_specs/nvidia-h100-sxm.json
for f in $D/m/*.json; do
  b=$(basename $f .json)
  $T schedule $f --hw $S -o $D/$b.after.json > /dev/null
  echo "=== $b after"; timeout 60 $T run $f --device cuda --hw $S --schedule $D/$b.after.json --check 2>&1 | tail -6; echo "rc=$?"
  python3 - $D/$b.after.json $D/$b.m128.json <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
for g in s["groups"]:
    k = g.get("kernel", {})
    if k.get("family") == "mma":
        k["params"].update(block_m=128, block_n=128, warps_m=2, warps_n=2, stages=3)
json.dump(s, open(sys.argv[2], "w"))
PY
  echo "=== $b mma 128x128"; timeout 60 $T run $f --device cuda --hw $S --schedule $D/$b.m128.json --check 2>&1 | tail -4
done
b=gemm.dlrm.bot_13_512.m16384.f16
timeout 120 /usr/local/cuda/bin/compute-sanitizer --print-limit 5 $T run $D/m/$b.json --device cuda --hw $S --schedule $D/$b.after.json --check > $D/sanitizer.txt 2>&1; echo "sanitizer rc=$?" >> $D/sanitizer.txt
tail -30 $D/sanitizer.txt
tar -C /tmp -czf $OUT/c2.tgz c2
