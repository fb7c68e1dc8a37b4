#!/usr/bin/env bash
# GPU call 1 (issue 28): the Python package's wheel on the GPU machine -- torch modules through
# tessel.compile, torch.compile(backend="tessel") on torchvision's ResNet-50 and transformers'
# BERT-base, against eager; then the package's CPU tests there.
set -x
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
python3 --version
python3 -c "import pytest, torch, torchvision, transformers; print(pytest.__version__, torch.__version__, torchvision.__version__, transformers.__version__)"
python3 -m pip install --no-deps --no-index --target /tmp/pylib dist/tessel/wheels/*.whl > /dev/null
export PYTHONPATH=/tmp/pylib LD_LIBRARY_PATH=$PWD/dist/tessel/lib
python3 -c "import tessel; print([ (b['name'], b['available']) for b in tessel.backends()])"
timeout 420 python3 -m pytest -v -s -p no:cacheprovider -rs --durations=10 tests/python/test_torch.py 2>&1 | tee $OUT/pytest_torch.txt | tail -40
timeout 120 python3 -m pytest -q -p no:cacheprovider -x tests/python/test_package.py tests/python/test_policies.py 2>&1 | tail -5 | tee $OUT/pytest_cpu.txt
