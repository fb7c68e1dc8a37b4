set -u
D=/tmp/c1; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv > $D/nvidia-smi.csv
date -u > $D/date.txt
cp tmp_call1.sh $D/call.sh
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tessel-cuda-cache
T=dist/tessel/bin/tessel; SPEC=hw_specs/nvidia-h100-sxm.json
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
# 1. the flash tests on the GPU (both kernels, the new heads of 160 and 256 included)
timeout 200 dist/tessel/bin/tessel_tests -tc="cuda flash*" > $D/tests.log 2>&1; echo "tests rc=$?" >> $D/tests.log
tail -4 $D/tests.log
# 2. ncu of the head-256 kernels and SD's head of 160 (registers, local memory, throughput)
for m in attention.gemma7b.prefill.b4s1024.f16 attention.gemma7b.decode.b8kv8192.f16 attention.sd_unet.self_s256_d160.b2.f16; do
  timeout 60 $T run tmp_ncu/$m.json --device cuda --hw $SPEC --check > $D/$m.check.txt 2>&1
  timeout 90 $NCU --clock-control none --target-processes all --section SpeedOfLight --section Occupancy --section LaunchStats \
    --section WarpStateStats --section ComputeWorkloadAnalysis $T run tmp_ncu/$m.json --device cuda --hw $SPEC > $D/ncu_$m.txt 2>&1
  echo "$m rc=$?" >> $D/ncu_rc.txt
done
# 3. the attention class of the op sweep
OUT=$D TESSEL_SWEEP_TIMEOUT=360 TESSEL_SWEEP_ARGS="--classes attention --time-budget 320" scripts/device_run sweep > $D/sweep_log.txt 2>&1
echo "sweep rc=$?" >> $D/sweep_log.txt
tail -5 $D/sweep_log.txt
tar -C /tmp -czf $OUT/c1.tgz c1
