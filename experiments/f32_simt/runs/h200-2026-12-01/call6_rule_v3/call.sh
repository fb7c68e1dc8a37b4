#!/usr/bin/env bash
# GPU call 6: the simt rule v3 (v2 with k slices for single-warp tiles while they leave a scheduler without a warp); the models v2 moved
# the shared cp.async ring and cluster reduction in device/mma.cuh. Checks, then f32 timings.
set -x
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
Q=$OUT/c6; mkdir -p $Q
cp dist/call6.sh $Q/call.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $Q/device.txt
python3 -m pip install --no-deps --no-index --target /tmp/pylib dist/tessel/wheels/*.whl > /dev/null
cp python/tessel/*.py /tmp/pylib/tessel/
export PYTHONPATH=/tmp/pylib LD_LIBRARY_PATH=$PWD/dist/tessel/lib
T=dist/tessel/bin/tessel_tests
timeout 120 $T -tc="cuda mma run: f32*,cuda mma run: the simt variants*" > $Q/cuda_tests.txt 2>&1
tail -4 $Q/cuda_tests.txt
timeout 300 python3 experiments/f32_simt/run_f32.py --out $Q/f32 \
  --models linear_decode_m32,linear_odd_k_aligned,linear_fc_8x2048,linear_bert_ffn,conv3x3_64_56,mlp_f32,bert2_f32,resnet50_f32 > $Q/f32.txt 2>&1
tail -16 $Q/f32.txt
for m in bert_base_layer; do
  timeout 90 dist/tessel/bin/tessel explain experiments/models/$m.json --hw hw_specs/nvidia-h200.json --profile 20 > $Q/profile_$m.txt 2>&1
  tail -3 $Q/profile_$m.txt
done
cd $OUT && tar czf c6.tgz c6 && rm -rf c6
