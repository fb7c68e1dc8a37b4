#!/bin/bash
# A/B/C: no prefetch vs 4 KiB vs 16 KiB ahead
cd /work/main
for r in 1 2; do
for i in gemm.llama70b.qkv.m1.f32 gemm.llama7b.o.m1.f32 gemm.gpt2.lm_head.m8.f32 gemm.llama7b.down.m32.f32 gemm.gpt2.ffn_down.m64.f32 gemm.llama7b.qkv.m32.f32 gemm.llama7b.down.m4.f32; do
  line="$i"
  for b in /tmp/tessel_nopf /tmp/tessel_pf4k /tmp/tessel_pf16k; do
    t=$($b run /tmp/sweepw/models/$i.json --device cpu --hw /tmp/s1/probe.json --time 10 --threads 2 --check 2>&1 | grep -o 'median [0-9.]*' | cut -d' ' -f2)
    line="$line $t"
  done
  echo $line
done; done
