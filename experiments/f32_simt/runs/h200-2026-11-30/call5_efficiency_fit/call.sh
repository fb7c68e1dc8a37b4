#!/usr/bin/env bash
# GPU call 5: the final build (family_efficiency simt 0.2 changes welder's f32 fusion): every
# bundled model against the interpreter under welder and roller, and the f32 BERT layer timed.
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
Q=$OUT/q5; mkdir -p $Q
cp tmp_diag/py/call5.sh $Q/call.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $Q/device.txt
for m in experiments/models/*.json; do
  n=$(basename $m .json)
  for p in welder roller; do
    timeout 120 dist/tessel/bin/tessel run $m --device cuda --hw hw_specs/nvidia-h200.json --policy $p --check > $Q/run_${n}_$p.txt 2>&1
    echo "$n $p rc=$? $(grep -o 'check: .*' $Q/run_${n}_$p.txt | head -2 | tr '\n' ' ')" | tee -a $Q/summary.txt
  done
done
timeout 60 dist/tessel/bin/tessel run experiments/models/bert_base_layer.json --device cuda --hw hw_specs/nvidia-h200.json --check --time 30 > $Q/bert_layer_f32.txt 2>&1
tail -3 $Q/bert_layer_f32.txt
timeout 60 dist/tessel/bin/tessel explain experiments/models/bert_base_layer.json --hw hw_specs/nvidia-h200.json --profile 20 > $Q/profile_bert_base_layer.txt 2>&1
tail -2 $Q/profile_bert_base_layer.txt
cd $OUT && tar czf q5.tgz q5 && rm -rf q5
