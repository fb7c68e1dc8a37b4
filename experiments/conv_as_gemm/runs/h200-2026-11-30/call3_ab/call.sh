#!/usr/bin/env bash
# Session 16, call 3 (1x H200): 1x1 stride-1 NHWC convolutions planned as matrix products instead of
# box-tiled implicit GEMMs. A/B: the build before (tessel_old, 1ba2167) against the build with the
# change, interleaved, on the 14 op-sweep instances whose plans change and on the suite's
# resnet_block; the changed build checked against the interpreter first. Then the GPU tests of the
# conv and variant cases, then CNN rows of the real-model suite (torch.compile side by side).
set -u
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
cp tmp_diag/tessel_old dist/tessel/libexec/tessel_old
printf '#!/bin/sh\nhere=$(cd "$(dirname "$0")/.." && pwd)\nLD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/libexec/tessel_old" "$@"\n' > dist/tessel/bin/tessel_old
chmod +x dist/tessel/bin/tessel_old
export TESSEL_SOURCE_DIR=$PWD
NEW=dist/tessel/bin/tessel; OLD=dist/tessel/bin/tessel_old; HW=hw_specs/nvidia-h100-sxm.json
D=$OUT/q3; mkdir -p $D; cp tmp_diag/callq3.sh $D/call.sh
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv > $D/nvidia-smi.csv
python3 experiments/op_sweep/instances.py --catalog gpu --out /tmp/gi > /dev/null
python3 experiments/workloads/workloads.py --suite gpu --out /tmp/wl --only resnet_block > /dev/null
models="/tmp/wl/resnet_block.json"
for i in $(cat tmp_diag/rb/changed.txt); do models="$models /tmp/gi/$i.json"; done
med() { grep -o "median [0-9.]* ms" | head -1 | awk '{print $2}'; }
for m in $models; do
  i=$(basename $m .json)
  TESSEL_CACHE_DIR=/tmp/tc_new timeout 90 $NEW run $m --device cuda --hw $HW --check > $D/$i.check.log 2>&1; c=$?
  TESSEL_CACHE_DIR=/tmp/tc_old timeout 90 $OLD run $m --device cuda --hw $HW > /dev/null 2>&1
  line="$i check_rc=$c"
  for r in 1 2; do
    o=$(TESSEL_CACHE_DIR=/tmp/tc_old timeout 60 $OLD run $m --device cuda --hw $HW --time 30 2>&1 | med)
    n=$(TESSEL_CACHE_DIR=/tmp/tc_new timeout 60 $NEW run $m --device cuda --hw $HW --time 30 2>&1 | med)
    line="$line old$r=$o new$r=$n"
  done
  echo "$line t=$SECONDS" | tee -a $D/ab.txt
done
tar -C $OUT -czf $OUT/q3.tgz q3
TESSEL_CACHE_DIR=/tmp/tc_new timeout $((360 - SECONDS > 60 ? 360 - SECONDS : 60)) dist/tessel/bin/tessel_tests \
  -tc="cuda mma run: the tensor-core variants*,cuda mma run: box-tiled*,cuda mma run: tensor-core kernels match*" > $D/tests.log 2>&1
echo "tests rc=$? t=$SECONDS" >> $D/rc.txt
grep -E "^\[doctest\] (test cases|assertions|Status)|ERROR|FATAL" $D/tests.log | head -20 >> $D/rc.txt
tar -C $OUT -czf $OUT/q3.tgz q3
TESSEL_CACHE_DIR=/tmp/tc_new timeout $((585 - SECONDS)) python3 experiments/real_models/run_real_models.py --tessel $NEW --hw $HW \
  --only resnet50_b1 resnet50_b8 mobilenet_v2_b8 efficientnet_b0_b8 resnext50_b8 --skip-bundled --repeats 30 \
  --time-budget $((560 - SECONDS)) --out $D/real-models --work /tmp/rw > $D/models.log 2>&1
echo "models rc=$? t=$SECONDS" >> $D/rc.txt
cat $D/ab.txt $D/rc.txt; tail -15 $D/models.log
tar -C $OUT -czf $OUT/q3.tgz q3
