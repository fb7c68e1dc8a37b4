#!/usr/bin/env bash
# GPU call 4: every simt form (1-2 x 1-4 warp tiles, k slices 1/2/4) of f32 Linear layers and the
# bundled f32 BERT layer, each predicted and measured by the tuner (tessel schedule --tune 18);
# the simt tests.
set -x
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
Q=$OUT/c4; mkdir -p $Q/tune; M=/tmp/models4
cp dist/call4.sh $Q/call.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $Q/device.txt
timeout 200 dist/tessel/bin/tessel_tests -tc="cuda mma run: f32*,cuda mma run: the simt variants*" > $Q/cuda_tests.txt 2>&1
tail -4 $Q/cuda_tests.txt
python3 experiments/f32_simt/linears.py $M > /dev/null
cp experiments/models/bert_base_layer.json $M/
for m in $M/*.json; do
  n=$(basename $m .json)
  timeout 200 dist/tessel/bin/tessel schedule $m --hw hw_specs/nvidia-h200.json --tune 18 --cache /tmp/tc4 -o $Q/tune/$n.schedule.json > $Q/tune/$n.txt 2>&1
  tail -2 $Q/tune/$n.txt
done
cd $OUT && tar czf c4.tgz c4 && rm -rf c4
