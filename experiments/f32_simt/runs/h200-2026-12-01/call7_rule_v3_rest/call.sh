#!/usr/bin/env bash
# GPU call 7: rule v3 (as call 6) on the run_f32 rows call 6 did not re-run
# the shared cp.async ring and cluster reduction in device/mma.cuh. Checks, then f32 timings.
set -x
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
Q=$OUT/c7; mkdir -p $Q
cp dist/call7.sh $Q/call.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $Q/device.txt
python3 -m pip install --no-deps --no-index --target /tmp/pylib dist/tessel/wheels/*.whl > /dev/null
cp python/tessel/*.py /tmp/pylib/tessel/
export PYTHONPATH=/tmp/pylib LD_LIBRARY_PATH=$PWD/dist/tessel/lib
T=dist/tessel/bin/tessel_tests
timeout 140 python3 experiments/f32_simt/run_f32.py --out $Q/f32 \
  --models conv3x3_128_28_s2,linear_decode,linear_decode_m1,linear_odd,linear_4096 > $Q/f32.txt 2>&1
tail -16 $Q/f32.txt
cd $OUT && tar czf c7.tgz c7 && rm -rf c7
