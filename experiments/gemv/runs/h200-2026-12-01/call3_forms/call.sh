#!/usr/bin/env bash
# GPU call 3 (session 21): the gemv forms and the tiled plans of three few-row products, each
# predicted and measured by the tuner (tessel schedule --tune 60, H200 spec): an f16 weight stored
# K x N (LLaMA-7B's MLP down at one token), the same at 4 tokens' QKV (where the rule keeps mma.sync),
# and an f32 Linear weight stored N x K at one token.
set -x
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
Q=$OUT/c3; mkdir -p $Q/tune; M=/tmp/m3
cp dist/call3.sh $Q/call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $Q/device.txt
python3 experiments/op_sweep/instances.py --out $M --only gemm.llama7b.down.m1.f16 gemm.llama7b.qkv.m4.f16 > /dev/null
python3 experiments/f32_simt/linears.py $M > /dev/null
for n in gemm.llama7b.down.m1.f16 gemm.llama7b.qkv.m4.f16 decode_1x4096x4096; do
  ( time timeout 150 dist/tessel/bin/tessel schedule $M/$n.json --hw hw_specs/nvidia-h200.json --tune 60 --cache /tmp/tc3 \
      -o $Q/tune/$n.schedule.json ) > $Q/tune/$n.txt 2>&1
  tail -3 $Q/tune/$n.txt
done
cd $OUT && tar czf c3.tgz c3 && rm -rf c3
