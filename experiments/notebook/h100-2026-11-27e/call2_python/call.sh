#!/usr/bin/env bash
# GPU call 2: why transformers' BERT graph fell back (export diagnosis), then the torch tests with
# the exporter fallback (the working tree's package files over the wheel's).
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
python3 -m pip install --no-deps --no-index --target /tmp/pylib dist/tessel/wheels/*.whl > /dev/null
cp python/tessel/*.py /tmp/pylib/tessel/
export PYTHONPATH=/tmp/pylib LD_LIBRARY_PATH=$PWD/dist/tessel/lib
timeout 200 python3 diag.py 2>&1 | tail -40 | tee $OUT/diag.txt
timeout 300 python3 -m pytest -v -s -p no:cacheprovider -rs tests/python/test_torch.py -k "bert or resnet" 2>&1 | grep -v DEBUG | tee $OUT/pytest_torch.txt | grep -E "PASSED|FAILED|error|Error|kept|compiled" | head -20
