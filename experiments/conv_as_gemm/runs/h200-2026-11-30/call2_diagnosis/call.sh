#!/usr/bin/env bash
# Session 16, call 2 (1x H200): why resnet_block's kernels run 3-5x their floors: the block's 1x1
# convolutions as convolutions and as GEMMs, each tuned (--tune 16: the model's 16 best kernels
# measured), ncu sections of the welder kernels; then the cost-model fidelity run (seed 3).
set -u
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
T=dist/tessel/bin/tessel; HW=hw_specs/nvidia-h100-sxm.json
D=$OUT/q2; mkdir -p $D/tune $D/ncu; cp tmp_diag/callq2.sh $D/call.sh
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv > $D/nvidia-smi.csv
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
python3 experiments/workloads/workloads.py --suite gpu --out /tmp/wl --only resnet_block > /dev/null
cp /tmp/wl/resnet_block.json tmp_diag/rb/
for m in tmp_diag/rb/*.json; do
  i=$(basename $m .json)
  timeout 120 $ncu --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats --section Occupancy --section SchedulerStats \
    --page details --csv -k regex:tessel_ $T run $m --device cuda --hw $HW > $D/ncu/$i.csv 2> $D/ncu/$i.err
  echo "ncu $i rc=$? t=$SECONDS" >> $D/rc.txt
done
for m in tmp_diag/rb/*.json; do
  i=$(basename $m .json)
  [[ $SECONDS -gt 300 ]] && break
  timeout 90 $T schedule $m --hw $HW --tune 16 -o $D/tune/$i.sched.json > $D/tune/$i.log 2>&1
  echo "tune $i rc=$? t=$SECONDS" >> $D/rc.txt
done
tar -C $OUT -czf $OUT/q2.tgz q2
timeout $((585 - SECONDS)) python3 experiments/cost_model_fidelity/run_fidelity.py --tessel $T --hw $HW --seed 3 --k 24 \
  --jobs 12 --time-budget $((560 - SECONDS)) --out $D/fidelity --work /tmp/fw > $D/fidelity.log 2>&1
echo "fidelity rc=$? t=$SECONDS" >> $D/rc.txt
cat $D/rc.txt; tail -5 $D/fidelity.log
tar -C $OUT -czf $OUT/q2.tgz q2
