#!/usr/bin/env bash
# Session 15, call 2 (1x H200): rcp.approx sigmoid build; fused vs unfused epilogues per kernel (ncu) for calibration; then scripts/gpu_check.
set -u
tar -C dist -xJf dist/tessel-0.1.0-x86_64.tar.xz
export TESSEL_SOURCE_DIR=$PWD TESSEL_CACHE_DIR=/tmp/tc
D=$OUT/m2; mkdir -p $D; cp tmp_diag/callm2.sh $D/call.sh
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv > $D/nvidia-smi.csv
T=dist/tessel/bin/tessel; M=tmp_diag/mlp
run() { # model sched tag
  timeout 90 $T run $M/$1.json --device cuda --hw hw_specs/nvidia-h100-sxm.json --schedule $M/$2 --check --time 50 > $D/$3.log 2>&1
  echo "$3 rc=$? $(grep -o 'median [0-9.]* ms\|MISMATCH' $D/$3.log | tr '\n' ' ')" >> $D/times.txt
}
for r in 1 2 3; do
  for v in fused2 unfused2; do run llama_mlp $v.sched.json mlp_$v; done
  for v in fused g2 g1; do run bert_ffn1 bert_ffn1.$v.sched.json ffn1_$v; done
done
echo "t=$SECONDS" >> $D/times.txt
MET=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,launch__registers_per_thread
for x in "llama_mlp fused2.sched.json mlp_fused2" "llama_mlp unfused2.sched.json mlp_unfused2" "bert_ffn1 bert_ffn1.fused.sched.json ffn1_fused" "bert_ffn1 bert_ffn1.g1.sched.json ffn1_g1"; do
  set -- $x
  timeout 100 ncu --metrics $MET -k regex:tessel_ --launch-count 4 --csv $T run $M/$1.json --device cuda --hw hw_specs/nvidia-h100-sxm.json --schedule $M/$2 --time 1 --no-graph > $D/ncu_$3.csv 2> $D/ncu_$3.err
  echo "ncu $3 rc=$? t=$SECONDS" >> $D/times.txt
done
cat $D/times.txt
tar -C $OUT -czf $OUT/m2.tgz m2 && rm -rf $D
OUT=$OUT/gc timeout 330 scripts/gpu_check > $OUT/gpu_check.log 2>&1; echo "gpu_check rc=$? t=$SECONDS"
tail -30 $OUT/gpu_check.log
tar -C $OUT -czf $OUT/gc.tgz gc gpu_check.log 2>/dev/null; rm -rf $OUT/gc; ls -la $OUT
