#!/usr/bin/env bash
# Session 13, call 3 (2x H200): the final build (f27932c). GPU 0: the op sweep's 24 decoding-type
# attention instances (H100 spec, as every sweep), the flash tests (GPU cases included), then the
# real-model transformer rows. GPU 1: the 14-workload GPU suite (torch.compile default, no
# max-autotune), every Tessel workload checked before it is timed.
set -u
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD
D=$OUT/f3; mkdir -p $D; cp tmp_diag/callf3.sh $D/call.sh
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv > $D/nvidia-smi.csv
T=dist/tessel/bin/tessel; HW=hw_specs/nvidia-h100-sxm.json
( export CUDA_VISIBLE_DEVICES=0 TESSEL_CACHE_DIR=/tmp/tc0
  timeout 200 python3 experiments/op_sweep/run_sweep.py --tessel $T --hw $HW --out $D/sweep --work /tmp/w0 \
    --only $(cat tmp_diag/only_decode.txt) --jobs 14 --torch-workers 8 --time-budget 170 > $D/sweep.log 2>&1; echo "sweep rc=$? t=$SECONDS" >> $D/rc.txt
  timeout 100 dist/tessel/bin/tessel_tests -tc="cuda flash*" > $D/tests.log 2>&1; echo "tests rc=$? t=$SECONDS" >> $D/rc.txt
  grep -E "^\[doctest\] (test cases|assertions|Status)" $D/tests.log >> $D/rc.txt
  timeout $((560 - SECONDS)) python3 experiments/real_models/run_real_models.py --tessel $T --hw $HW --out $D/real-models --work /tmp/wr \
    --skip-bundled --only llama_2048x4 gpt2 bert_base vit_b_16 --warm-jobs 10 --warm-timeout 150 --time-budget $((545 - SECONDS)) \
    > $D/models.log 2>&1; echo "models rc=$? t=$SECONDS" >> $D/rc.txt ) &
( export CUDA_VISIBLE_DEVICES=1 TESSEL_CACHE_DIR=/tmp/tc1
  timeout 560 python3 experiments/gpu_suite/run_suite.py --tessel $T --out $D/gpu-suite --work /tmp/ws --no-autotune \
    > $D/suite.log 2>&1; echo "suite rc=$? t=$SECONDS" >> $D/rc.txt ) &
wait
cat $D/rc.txt; tar -C $OUT -czf $OUT/f3.tgz f3 && rm -rf $D; ls -la $OUT
