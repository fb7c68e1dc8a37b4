#!/usr/bin/env bash
# Session 22, call 5 (1x H200): why the clustered 2:4 wgmma.sp kernel (two blocks sharing X by
# multicast) runs ~1.85x slower than unclustered -- ncu launch statistics, occupancy and speed of light.
set -u
D=$OUT/c5; mkdir -p $D; cp dist/call5.sh $D/call.sh
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
T=$PWD/dist/tessel/bin/tessel; HW=$PWD/hw_specs/nvidia-h200.json
python3 experiments/sparse/run_sparse.py --write-models /tmp/m --nm-only --only-shapes llama7b.4096x4096 > /dev/null 2>&1
$T run /tmp/m/llama7b.4096x4096.kn.nm2of4.json --device cuda --hw $HW --time 5 > $D/run.txt 2>&1
timeout 300 ncu --section LaunchStats --section Occupancy --section SpeedOfLight --section MemoryWorkloadAnalysis -k regex:tessel --launch-count 1 \
  $T run /tmp/m/llama7b.4096x4096.kn.nm2of4.json --device cuda --hw $HW --time 1 > $D/ncu.txt 2>&1
echo "ncu rc=$? t=$SECONDS" | tee -a $D/rc.txt
grep -iE "grid size|cluster|block size|waves|achieved occupancy|theoretical occupancy|duration|sm busy|memory throughput|l2 cache throughput|compute \(sm\)|dram throughput|registers|shared memory" $D/ncu.txt | head -40
tar -C $OUT -czf $OUT/c5.tgz c5
