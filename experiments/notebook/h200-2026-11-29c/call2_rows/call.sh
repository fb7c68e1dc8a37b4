set -u
D=/tmp/c2; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv > $D/nvidia-smi.csv
date -u > $D/date.txt
cp tmp_call2.sh $D/call.sh
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tessel-cuda-cache
T=dist/tessel/bin/tessel; SPEC=hw_specs/nvidia-h100-sxm.json
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
# 1. the row tests on the GPU (shifted and online streamed rows against the interpreter)
timeout 150 dist/tessel/bin/tessel_tests -tc="cuda row*" > $D/tests.log 2>&1; echo "tests rc=$?" >> $D/tests.log
tail -4 $D/tests.log
# 2. the row class of the op sweep
OUT=$D TESSEL_SWEEP_TIMEOUT=330 TESSEL_SWEEP_ARGS="--classes row --time-budget 290" scripts/device_run sweep > $D/sweep_log.txt 2>&1
echo "sweep rc=$?" >> $D/sweep_log.txt
tail -3 $D/sweep_log.txt
# 3. ncu of the vocabulary softmaxes (many rows, few rows)
for m in row.gpt2.vocab_logsoftmax.m2048.f16 row.gpt2.vocab_softmax.m8.f16; do
  timeout 60 $T run tmp_ncu/$m.json --device cuda --hw $SPEC --check > $D/$m.check.txt 2>&1
  timeout 60 $NCU --clock-control none --target-processes all --section SpeedOfLight --section Occupancy --section LaunchStats \
    --section WarpStateStats --section MemoryWorkloadAnalysis $T run tmp_ncu/$m.json --device cuda --hw $SPEC > $D/ncu_$m.txt 2>&1
  echo "$m rc=$?" >> $D/ncu_rc.txt
done
tar -C /tmp -czf $OUT/c2.tgz c2
