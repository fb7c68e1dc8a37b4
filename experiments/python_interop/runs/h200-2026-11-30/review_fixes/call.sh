#!/usr/bin/env bash
# GPU call 6: the review fixes -- the torch tests (status flags of runs queued back to back, a run
# on another stream waiting for its inputs' copies), the C++ run_on_queue and f32 cases.
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
Q=$OUT/q6; mkdir -p $Q
cp tmp_diag/py/call6.sh $Q/call.sh
python3 -m pip install --no-deps --no-index --target /tmp/pylib dist/tessel/wheels/*.whl > /dev/null
cp python/tessel/*.py /tmp/pylib/tessel/
export PYTHONPATH=/tmp/pylib LD_LIBRARY_PATH=$PWD/dist/tessel/lib
timeout 120 python3 -m pytest -v -s -p no:cacheprovider -rs tests/python/test_torch.py -k "device or gather" > $Q/pytest_torch.txt 2>&1
grep -E "PASSED|FAILED|ERROR|passed|failed" $Q/pytest_torch.txt | tail -12
timeout 120 dist/tessel/bin/tessel_tests -tc="cuda run: run_on_queue*,cuda mma run: f32*" > $Q/cpp.txt 2>&1
tail -3 $Q/cpp.txt
cd $OUT && tar czf q6.tgz q6 && rm -rf q6
