#!/usr/bin/env bash
# GPU call 3: the simt forms (k slices 1, 2, 4) measured one group at a time by the tuner
# (tessel run --tune 3) on f32 Linear layers and the bundled f32 BERT layer; the simt tests.
set -x
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
Q=$OUT/c3; mkdir -p $Q/tune; M=/tmp/models3
cp dist/call3.sh $Q/call.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $Q/device.txt
T=dist/tessel/bin/tessel_tests
[ -d /tmp/tc3 ] || timeout 150 $T -tc="cuda mma run: f32*,cuda mma run: the simt variants*" > $Q/cuda_tests.txt 2>&1
tail -4 $Q/cuda_tests.txt
python3 experiments/f32_simt/linears.py $M > /dev/null
cp experiments/models/bert_base_layer.json $M/
for m in $M/*.json; do
  n=$(basename $m .json)
  timeout 150 dist/tessel/bin/tessel run $m --device cuda --hw hw_specs/nvidia-h200.json --tune 3 --cache /tmp/tc3 --check --time 30 --report $Q/tune/$n.report.json > $Q/tune/$n.txt 2>&1
  grep -E "median|check|error" $Q/tune/$n.txt | head -3
  timeout 60 dist/tessel/bin/tessel explain $m --hw hw_specs/nvidia-h200.json --cache /tmp/tc3 > $Q/tune/$n.explain.txt 2>&1
done
cp /tmp/tc3/measurements.json $Q/ 2>/dev/null
cd $OUT && tar czf c3.tgz c3 && rm -rf c3
