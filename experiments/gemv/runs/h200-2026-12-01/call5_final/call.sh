#!/usr/bin/env bash
# GPU call 5 (session 21): the final build (b3e0535: device/gemv.cuh's load_columns refactor) --
# the gemv and simt GPU tests, and f32 ResNet-50 (its classifier at batch 8 on the gemv family).
set -x
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
Q=$OUT/c5; mkdir -p $Q
cp dist/call5.sh $Q/call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $Q/device.txt
python3 -m pip install --no-deps --no-index --target /tmp/pylib dist/tessel/wheels/*.whl > /dev/null
cp python/tessel/*.py /tmp/pylib/tessel/
export PYTHONPATH=/tmp/pylib LD_LIBRARY_PATH=$PWD/dist/tessel/lib
timeout 120 dist/tessel/bin/tessel_tests -tc="cuda gemv*,cuda mma run: f32*,cuda flash run: recorded key splits*" > $Q/cuda_tests.txt 2>&1
tail -4 $Q/cuda_tests.txt
timeout 110 python3 experiments/f32_simt/run_f32.py --out $Q/f32 --models resnet50_f32,linear_decode_m1 > $Q/f32.txt 2>&1
tail -4 $Q/f32.txt
cd $OUT && tar czf c5.tgz c5 && rm -rf c5
