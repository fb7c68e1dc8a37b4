#!/usr/bin/env bash
# Session 16, call 1 (1x H200): the GPU suite at HEAD (1ba2167), ncu per-kernel times of the
# weakest suite workloads, then the op-sweep GEMMs whose plans 75b8db6 changed.
set -u
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
D=$OUT/q1; mkdir -p $D; cp tmp_diag/callq1.sh $D/call.sh
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv > $D/nvidia-smi.csv
timeout 390 python3 experiments/gpu_suite/run_suite.py --tessel dist/tessel/bin/tessel --no-autotune --out $D/suite --work /tmp/sw > $D/suite.log 2>&1
echo "suite rc=$? t=$SECONDS" >> $D/rc.txt
tar -C $OUT -czf $OUT/q1.tgz q1
OUT=$D TESSEL_PROFILE="attention resnet_block gemm_decode" timeout $((500 - SECONDS)) scripts/device_run profile > $D/profile.log 2>&1
echo "profile rc=$? t=$SECONDS" >> $D/rc.txt
tar -C $OUT -czf $OUT/q1.tgz q1
timeout $((585 - SECONDS)) python3 experiments/op_sweep/run_sweep.py --tessel dist/tessel/bin/tessel \
  --out $D/sweep --work /tmp/w0 --only gemm.vit_l16.ffn_up.m197.f16 gemm.vit_l16.ffn_up.m197.bf16 gemm.dlrm.top_1024_1024.m2048.f16 gemm.dlrm.top_479_1024.m2048.f16 gemm.dlrm.top_1024_512.m2048.f16 gemm.dlrm.top_512_256.m2048.f16 \
  --jobs 8 --torch-workers 4 --time-budget $((570 - SECONDS)) > $D/sweep.log 2>&1
echo "sweep rc=$? t=$SECONDS" >> $D/rc.txt
cat $D/rc.txt; tail -22 $D/suite.log; cat $D/profile/summary.txt 2>/dev/null | head -40
tar -C $OUT -czf $OUT/q1.tgz q1
