set -u
D=/tmp/c4; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv > $D/nvidia-smi.csv
date -u > $D/date.txt
cp tmp_call4.sh $D/call.sh
export TESSEL_SOURCE_DIR=$PWD
# the final code of this commit (recomputed reads, by vectors where aligned; streamed rows of 512)
xz -dc tmp_variants/tessel_final.xz > dist/tessel/libexec/tessel; xz -dc tmp_variants/tessel_tests_final.xz > dist/tessel/libexec/tessel_tests
chmod +x dist/tessel/libexec/tessel dist/tessel/libexec/tessel_tests
# 1. the vector, row and flash cases on the GPU (against the interpreter)
timeout 150 dist/tessel/bin/tessel_tests -tc="cuda vector*,cuda row*,cuda flash*" > $D/tests.log 2>&1; echo "tests rc=$?" >> $D/tests.log; tail -4 $D/tests.log
S="python3 experiments/op_sweep/run_sweep.py --hw hw_specs/nvidia-h100-sxm.json --tessel dist/tessel/bin/tessel"
# 2. the rotary embeddings, recomputed by vectors (Tessel only; 2026-11-29d call 2 has the baselines)
TESSEL_CACHE_DIR=/tmp/cc_r timeout 60 $S --no-torch --out $D/rope --work /tmp/w_r --time-budget 45 --only eltwise.llama7b.rope.t2048.f16 eltwise.llama7b.rope.t2048.bf16 > $D/rope_log.txt 2>&1; echo "rc=$?" >> $D/rope_log.txt; tail -3 $D/rope_log.txt
# 3. half the convolution class (--shard 0/2) with the PyTorch baselines (last measured on 2026-11-26)
TESSEL_CACHE_DIR=/tmp/cc_c timeout 320 $S --classes conv --shard 0/2 --out $D/conv --work /tmp/w_c --time-budget 250 > $D/conv_log.txt 2>&1; echo "rc=$?" >> $D/conv_log.txt; tail -3 $D/conv_log.txt
tar -C /tmp -czf $OUT/c4.tgz c4
