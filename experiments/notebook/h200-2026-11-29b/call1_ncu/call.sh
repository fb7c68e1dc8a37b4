set -u
D=/tmp/c1; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv > $D/nvidia-smi.csv
date -u > $D/date.txt
cp tmp_call1.sh $D/call.sh
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tessel-cuda-cache
T=dist/tessel/bin/tessel; SPEC=hw_specs/nvidia-h100-sxm.json
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
S=experiments/family_ranking/schedules
E=conv.mobilenetv2.pw_expand_24_144.b32.nhwc.f16; C=conv.sd_unet.conv_in.b2.nhwc.f16
prof() {  # name model [schedule]
  local name=$1 model=$2; shift 2
  # compile once outside the profiler (cache), then one profiled run
  timeout 60 $T run $model --device cuda --hw $SPEC "$@" --check > $D/$name.check.txt 2>&1
  timeout 90 $NCU --clock-control none --target-processes all --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis \
    $T run $model --device cuda --hw $SPEC "$@" > $D/ncu_$name.txt 2>&1
  echo "$name rc=$?" >> $D/ncu_rc.txt
}
prof expand_wgmma tmp_ncu/$E.json --schedule $S/$E.before.json
prof expand_m128n256 tmp_ncu/$E.json --schedule $S/$E.m128n256.json
prof expand_m128n64 tmp_ncu/$E.json --schedule $S/$E.m128n64.json
prof conv_in_now tmp_ncu/$C.json
prof conv_in_wgmma tmp_ncu/$C.json --schedule $S/$C.before.json
echo "ncu done $(date -u)" >> $D/ncu_rc.txt
OUT=$D TESSEL_CHECK_TIMEOUT=430 scripts/device_run check > $D/check_log.txt 2>&1; echo "check rc=$?" >> $D/check_log.txt
tail -5 $D/check_log.txt
cat $D/ncu_rc.txt
tar -C /tmp -czf $OUT/c1.tgz c1
