#!/usr/bin/env bash
# GPU call 1 (session 21): the gemv family. The gemv and f32 GPU tests; the f32 Linear layers of
# M = 1 and 8 against torch; the op sweep's GEMMs of M <= 8 (H100 spec, as every sweep run).
set -x
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
Q=$OUT/c1; mkdir -p $Q
cp dist/call1.sh $Q/call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $Q/device.txt
python3 -m pip install --no-deps --no-index --target /tmp/pylib dist/tessel/wheels/*.whl > /dev/null
cp python/tessel/*.py /tmp/pylib/tessel/
export PYTHONPATH=/tmp/pylib LD_LIBRARY_PATH=$PWD/dist/tessel/lib
T=dist/tessel/bin/tessel_tests
timeout 110 $T -tc="cuda gemv*,cuda mma run: f32 products*" > $Q/cuda_tests.txt 2>&1
tail -4 $Q/cuda_tests.txt
timeout 100 python3 experiments/f32_simt/run_f32.py --out $Q/f32 --models linear_decode_m1,linear_fc_8x2048,linear_decode > $Q/f32.txt 2>&1
tail -8 $Q/f32.txt
timeout 280 python3 experiments/op_sweep/run_sweep.py --tessel dist/tessel/bin/tessel \
    --hw hw_specs/nvidia-h100-sxm.json --out $Q/sweep --work /tmp/w0 --only $(cat dist/only_gemv.txt) \
    --jobs 14 --torch-workers 8 --time-budget 240 > $Q/sweep.log 2>&1; echo "sweep rc=$?" >> $Q/rc.txt
tail -30 $Q/sweep/report.md 2>/dev/null | head -40
cd $OUT && tar czf c1.tgz c1 && rm -rf c1
