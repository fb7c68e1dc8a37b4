#!/usr/bin/env bash
# Session 16, call 4 (1x H200): with 4c5d5a7's bundle (1x1 convolutions as matrix products), the
# suite's convolution workloads side by side with eager and torch.compile, then real-model CNN rows
# the previous call did not run.
set -u
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
D=$OUT/q4; mkdir -p $D; cp tmp_diag/callq4.sh $D/call.sh
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv > $D/nvidia-smi.csv
timeout 100 python3 experiments/gpu_suite/run_suite.py --tessel dist/tessel/bin/tessel --no-autotune --only resnet_block conv_bn_relu \
  --out $D/suite --work /tmp/sw > $D/suite.log 2>&1
echo "suite rc=$? t=$SECONDS" >> $D/rc.txt
tar -C $OUT -czf $OUT/q4.tgz q4
timeout $((215 - SECONDS)) python3 experiments/real_models/run_real_models.py --tessel dist/tessel/bin/tessel \
  --only mobilenet_v2_b1 efficientnet_b0_b1 --skip-bundled --repeats 30 --time-budget $((200 - SECONDS)) \
  --out $D/real-models --work /tmp/rw > $D/models.log 2>&1
echo "models rc=$? t=$SECONDS" >> $D/rc.txt
cat $D/rc.txt; tail -6 $D/suite.log; tail -6 $D/models.log
tar -C $OUT -czf $OUT/q4.tgz q4
