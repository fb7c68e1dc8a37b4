#!/usr/bin/env bash
# GPU call 1 (issue 28): zero-copy device runs on the caller's stream -- the C++ case, the torch
# tests (new device-run cases + torch.compile on ResNet-50 and BERT), the interop experiment.
set -x
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
Q=$OUT/q1; mkdir -p $Q
cp tmp_diag/py/call1.sh $Q/call.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $Q/device.txt
python3 --version | tee -a $Q/device.txt
python3 -c "import torch, torchvision, transformers; print(torch.__version__, torchvision.__version__, transformers.__version__)" | tee -a $Q/device.txt
python3 -m pip install --no-deps --no-index --target /tmp/pylib dist/tessel/wheels/*.whl > /dev/null
cp python/tessel/*.py /tmp/pylib/tessel/
export PYTHONPATH=/tmp/pylib LD_LIBRARY_PATH=$PWD/dist/tessel/lib
timeout 120 dist/tessel/bin/tessel_tests -tc="cuda run: run_on_queue*,cuda run: an out-of-range*,cuda run: f16*" > $Q/cpp_run_on_queue.txt 2>&1
tail -3 $Q/cpp_run_on_queue.txt
timeout 200 python3 -m pytest -v -s -p no:cacheprovider -rs --durations=12 tests/python/test_torch.py > $Q/pytest_torch.txt 2>&1
grep -E "PASSED|FAILED|ERROR|passed|failed" $Q/pytest_torch.txt | tail -20
timeout 320 python3 experiments/python_interop/run_interop.py --out $Q/interop > $Q/interop.txt 2>&1
tail -12 $Q/interop.txt
cd $OUT && tar czf q1.tgz q1 && rm -rf q1
