set -u
D=/tmp/c4; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv > $D/nvidia-smi.csv
date -u > $D/date.txt
cp tmp_call4.sh $D/call.sh
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tessel-cuda-cache
# 1. the 22 streamed rows of the op sweep again (their chunk loop unrolled 8 times, not 4)
OUT=$D TESSEL_SWEEP_TIMEOUT=95 TESSEL_SWEEP_ARGS="--only row.gpt2.vocab_softmax.m1024.f16 row.gpt2.vocab_softmax.m8.f16 row.gpt2.vocab_logsoftmax.m2048.f16 row.gpt2.vocab_max.m1024.f16 row.llama7b.vocab_softmax.m512.f16 row.llama7b.vocab_softmax.m16.f16 row.llama7b.vocab_max.m16.f16 row.llama70b.vocab_softmax.m512.f16 row.llama70b.vocab_softmax.m16.f16 row.gemma7b.vocab_softmax.m64.f16 row.whisper.dec_vocab_softmax.m256.f16 row.gpt2.vocab_softmax.m1024.bf16 row.gpt2.vocab_softmax.m8.bf16 row.gpt2.vocab_logsoftmax.m2048.bf16 row.gpt2.vocab_max.m1024.bf16 row.llama7b.vocab_softmax.m512.bf16 row.llama7b.vocab_softmax.m16.bf16 row.llama7b.vocab_max.m16.bf16 row.llama70b.vocab_softmax.m512.bf16 row.llama70b.vocab_softmax.m16.bf16 row.gemma7b.vocab_softmax.m64.bf16 row.whisper.dec_vocab_softmax.m256.bf16 --time-budget 70" scripts/device_run sweep > $D/sweep_log.txt 2>&1
echo "sweep rc=$?" >> $D/sweep_log.txt
tail -2 $D/sweep_log.txt
# 2. every CUDA test case and bundled model on the GPU
OUT=$D TESSEL_CHECK_TIMEOUT=440 scripts/device_run check > $D/check_log.txt 2>&1; echo "check rc=$?" >> $D/check_log.txt
tail -6 $D/check_log.txt
tar -C /tmp -czf $OUT/c4.tgz c4
