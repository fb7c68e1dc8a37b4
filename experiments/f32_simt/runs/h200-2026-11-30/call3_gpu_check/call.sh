#!/usr/bin/env bash
# GPU call 3: every CUDA test case and bundled model against the interpreter (scripts/gpu_check),
# on the build with the simt family (every f32 contraction changed kernel) and run_on_queue.
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
mkdir -p $OUT/q3
cp tmp_diag/py/call3.sh $OUT/q3/call.sh
OUT=$OUT/q3 timeout 580 scripts/gpu_check > $OUT/q3/gpu_check.txt 2>&1
echo "rc=$?" >> $OUT/q3/gpu_check.txt
tail -15 $OUT/q3/gpu_check.txt
cd $OUT && tar czf q3.tgz q3 && rm -rf q3
