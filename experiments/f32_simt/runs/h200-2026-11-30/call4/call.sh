#!/usr/bin/env bash
# GPU call 4 (issue 23): f32 contractions and models side by side with eager and torch.compile
# (TF32 off on both sides), and each simt kernel's measured time beside its prediction.
set -x
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
Q=$OUT/q4; mkdir -p $Q
cp tmp_diag/py/call4.sh $Q/call.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $Q/device.txt
python3 -m pip install --no-deps --no-index --target /tmp/pylib dist/tessel/wheels/*.whl > /dev/null
cp python/tessel/*.py /tmp/pylib/tessel/
export PYTHONPATH=/tmp/pylib LD_LIBRARY_PATH=$PWD/dist/tessel/lib
timeout 100 dist/tessel/bin/tessel_tests -tc="cuda vector*" > $Q/cuda_vector_tests.txt 2>&1
tail -3 $Q/cuda_vector_tests.txt
for m in bert_base_layer resnet50; do
  timeout 90 dist/tessel/bin/tessel explain experiments/models/$m.json --hw hw_specs/nvidia-h200.json --profile 20 > $Q/profile_$m.txt 2>&1
  tail -3 $Q/profile_$m.txt
done
timeout 330 python3 experiments/f32_simt/run_f32.py --out $Q/f32 > $Q/f32.txt 2>&1
tail -14 $Q/f32.txt
cd $OUT && tar czf q4.tgz q4 && rm -rf q4
