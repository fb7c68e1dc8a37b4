#!/usr/bin/env bash
# GPU call 3: the CUDA side of this session's kernel changes -- every CUDA test case (the kernels now
# compile in parallel), explain --profile (each kernel timed between its own events) and --compare
# on two GPU-suite workloads in f16, and the torch tests again (Compiled.profile on the GPU).
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
python3 - <<'PY'
import sys; sys.path.insert(0, "experiments/workloads"); import workloads
for w in workloads.gpu_suite():
    if w.id in ("bert_layer", "llama_block"):
        open(f"/tmp/{w.id}.json", "w").write(workloads.gm.render(w.build("f16").document()) + "\n")
PY
T=dist/tessel/bin/tessel
for m in bert_layer llama_block; do
  timeout 120 $T explain /tmp/$m.json --hw nvidia-h100-sxm --profile 20 > $OUT/explain_$m.txt 2>&1; echo "explain $m: $?"
  grep -E "^kernel|predicted|profiled" $OUT/explain_$m.txt | tail -4
  timeout 120 $T explain /tmp/$m.json --hw nvidia-h100-sxm --profile 20 --format html -o $OUT/explain_$m.html; echo "html $m: $?"
done
timeout 200 $T explain /tmp/bert_layer.json --hw nvidia-h100-sxm --profile 20 --compare welder,roller 2>&1 | tee $OUT/compare_bert_layer.txt
python3 -m pip install --no-deps --no-index --target /tmp/pylib dist/tessel/wheels/*.whl > /dev/null
export PYTHONPATH=/tmp/pylib
( export LD_LIBRARY_PATH=$PWD/dist/tessel/lib; timeout 150 python3 -m pytest -v -s -p no:cacheprovider -rs tests/python/test_torch.py 2>&1 | grep -v DEBUG > $OUT/pytest_torch.txt; grep -E "PASSED|FAILED|passed|failed|MLP f16" $OUT/pytest_torch.txt | tail -12 )
OUT=$OUT timeout 330 scripts/device_run check 2>&1 | tail -8
