#!/usr/bin/env bash
# Session 11, call 4 (2 GPUs, short): segments reading their inputs in place (bind_inputs) against
# the build that copied them (tessel_copies), overlap off / on, interleaved; the GPU distributed tests.
set -u
D=$OUT/c4; mkdir -p $D
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
for v in copies tests; do xz -dc tmp_variants/tessel_$v.xz > dist/tessel/libexec/tessel_$v; chmod +x dist/tessel/libexec/tessel_$v
  sed "s|libexec/tessel\"|libexec/tessel_$v\"|" dist/tessel/bin/tessel > dist/tessel/bin/tessel_$v; chmod +x dist/tessel/bin/tessel_$v; done
export TESSEL_SOURCE_DIR=$PWD NCCL_NVLS_ENABLE=0
export TESSEL_NCCL_LIBRARY=$(python3 -c "import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],'lib','libnccl.so.2'))")
export TESSEL_CACHE_DIR=/tmp/tcache
cp tmp_diag/callc4.sh $D/; nvidia-smi --query-gpu=name,clocks.sm,driver_version --format=csv > $D/nvidia-smi.csv
timeout 60 dist/tessel/bin/tessel_tests -tc="cuda distributed*" > $D/tests.log 2>&1; echo "tests rc=$?" | tee $D/tests_tail.txt
grep -E "^\[doctest\] (test cases|assertions|Status)" $D/tests.log | tee -a $D/tests_tail.txt
HW=hw_specs/nvidia-h200-x2.json
for m in ag8192 mlp8192 ag4096; do
  case $m in ag*) PIN="x=S0 w=S1 y=S1";; *) PIN="x=S0 gate_w=S1 up_w=S1 down_w=S0 y=S0";; esac
  for r in 0 1; do for b in tessel tessel_copies; do for o in off on; do
    C=""; [[ $r == 0 && $b == tessel ]] && C="--check"
    t=$(timeout 60 dist/tessel/bin/$b run tmp_diag/ovm/$m.json --device cuda --mesh 2 --hw $HW --shard "$PIN" --overlap $o --time 30 $C 2>&1 | tee -a $D/runs.log | grep -o "time: [0-9.]* ms\|matches\|mismatch\|rror.*" | tr '\n' ' ')
    echo "$m r$r $b $o $t" | tee -a $D/ab.txt
  done; done; done
done
echo "t=$SECONDS"
