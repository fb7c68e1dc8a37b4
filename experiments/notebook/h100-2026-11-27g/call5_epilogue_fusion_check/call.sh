#!/usr/bin/env bash
# GPU call 5: experiments/epilogue_fusion (GELU fused into the wgmma epilogue or apart, three
# graphs), then scripts/gpu_check (every CUDA test case, every bundled model) on this build.
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
D=/tmp/c5; rm -rf $D; mkdir -p $D
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $D/nvidia-smi.csv
timeout 150 experiments/epilogue_fusion/run.sh dist/tessel/bin/tessel $D/epilogue_fusion.csv > $D/epilogue_fusion.log 2>&1
echo "epilogue rc=$?"; cat $D/epilogue_fusion.csv
OUT=$D scripts/device_run check > $D/check_stage.log 2>&1
echo "check rc=$?"
tar -C /tmp -czf $OUT/c5.tgz c5
tail -4 $D/check_stage.log; cat $D/summary.txt
grep -E "test cases|assertions|FAIL|ERROR" $D/check.log | head -20
