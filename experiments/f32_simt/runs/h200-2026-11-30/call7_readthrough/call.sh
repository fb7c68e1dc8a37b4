#!/usr/bin/env bash
# GPU call 7: the read-through refactor (SimtBlockGemm's load4, the shared run_models) -- the f32
# GPU cases and one model through each experiment script.
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
Q=$OUT/q7; mkdir -p $Q
cp tmp_diag/py/call7.sh $Q/call.sh
python3 -m pip install --no-deps --no-index --target /tmp/pylib dist/tessel/wheels/*.whl > /dev/null
cp python/tessel/*.py /tmp/pylib/tessel/
export PYTHONPATH=/tmp/pylib LD_LIBRARY_PATH=$PWD/dist/tessel/lib
timeout 120 dist/tessel/bin/tessel_tests -tc="cuda mma run: f32*,cuda run: run_on_queue*" > $Q/cpp.txt 2>&1
tail -3 $Q/cpp.txt
timeout 60 dist/tessel/bin/tessel run experiments/models/bert_base_layer.json --device cuda --hw hw_specs/nvidia-h200.json --check --time 30 > $Q/bert_layer_f32.txt 2>&1
tail -2 $Q/bert_layer_f32.txt
timeout 90 python3 experiments/f32_simt/run_f32.py --models linear_bert_ffn,linear_4096 --out $Q/f32 > $Q/f32.txt 2>&1
tail -4 $Q/f32.txt
timeout 60 python3 experiments/python_interop/run_interop.py --models mlp --out $Q/interop > $Q/interop.txt 2>&1
tail -3 $Q/interop.txt
cd $OUT && tar czf q7.tgz q7 && rm -rf q7
