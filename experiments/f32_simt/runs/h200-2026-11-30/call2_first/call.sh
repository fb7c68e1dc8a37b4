#!/usr/bin/env bash
# GPU call 2 (issue 23): f32 products on the CUDA cores (the simt family) -- the GPU test cases,
# the f32 BERT layer through the CLI, f32 models from Python against eager and torch.compile,
# and the CUDA run/mma test cases (the planner changed for every contraction).
set -x
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
Q=$OUT/q2; mkdir -p $Q
cp tmp_diag/py/call2.sh $Q/call.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $Q/device.txt
python3 -m pip install --no-deps --no-index --target /tmp/pylib dist/tessel/wheels/*.whl > /dev/null
cp python/tessel/*.py /tmp/pylib/tessel/
export PYTHONPATH=/tmp/pylib LD_LIBRARY_PATH=$PWD/dist/tessel/lib
timeout 150 dist/tessel/bin/tessel_tests -tc="cuda mma run: f32*,cuda mma: f32*,cuda run: run_on_queue*" > $Q/cpp_simt.txt 2>&1
tail -3 $Q/cpp_simt.txt
timeout 60 dist/tessel/bin/tessel run experiments/models/bert_base_layer.json --device cuda --hw hw_specs/nvidia-h200.json --check --time 30 > $Q/bert_layer_f32.txt 2>&1
tail -8 $Q/bert_layer_f32.txt
timeout 200 python3 experiments/python_interop/run_interop.py --models mlp_f32,linear_f32,bert2 --out $Q/interop > $Q/interop.txt 2>&1
tail -8 $Q/interop.txt
timeout 150 dist/tessel/bin/tessel_tests -tc="cuda mma run*,cuda run:*" > $Q/cpp_cuda_run.txt 2>&1
tail -3 $Q/cpp_cuda_run.txt
cd $OUT && tar czf q2.tgz q2 && rm -rf q2
